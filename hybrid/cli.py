"""The ``hybrid`` command's entry point (``hybrid.cli:main``), kept at this address for console
scripts installed before the package was laid out by layer and for anyone who runs
``python -m hybrid.cli``; the command itself is :mod:`hybrid.faces.cli.main`."""

from hybrid.faces.cli.main import main

__all__ = ["main"]

if __name__ == "__main__":
    main()
