"""keyshared: the command-line entry point that ties the kit's packages together."""

__version__ = "0.1.0"
