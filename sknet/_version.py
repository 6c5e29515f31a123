"""sknet's version, in a module of its own that every other module may import."""

__version__ = "0.1.0"
