"""Differential privacy (docs/privacy.md): spec.py, the `privacy:` keys (torch-free);
mechanism.py, clipping, noise and adaptive clipping on update rows (torch); accountant.py,
epsilon so far from dp-accounting's RDP accountant and the noise multiplier for a target
(torch-free)."""
