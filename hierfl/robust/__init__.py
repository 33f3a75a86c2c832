"""Byzantine clients and robust aggregation (docs/robustness.md). spec.py: the `aggregate:`
and `attack:` keys (torch-free: `hierfl validate` reads them); rules.py: how an aggregator
combines its children's updates; attacks.py: which clients attack and what they send."""
