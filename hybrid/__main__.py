"""``python -m hybrid``: the ``hybrid`` command."""

from hybrid.faces.cli.main import main

if __name__ == "__main__":
    main()
