"""``python -m idlegate``: the same as the ``idlegate`` command."""

from idlegate.launch import main

if __name__ == "__main__":
    main()
