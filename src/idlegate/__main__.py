"""``python -m idlegate``: the same as the ``idlegate`` command."""

from idlegate.cli import main

if __name__ == "__main__":
    main()
