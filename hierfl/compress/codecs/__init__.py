"""The built-in codecs, one module each (`compress: {up: {kind: <module name>}}`): each declares
its keys, its facts, its byte rule and its encode rule with `declare_codec`
(hierfl/compress/registry.py), torch-free at import. The codec registry finds them by importing
every module here."""
