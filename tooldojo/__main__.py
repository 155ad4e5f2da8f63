"""`python -m tooldojo ...` is `dojo ...` (for launchers that run a module: `accelerate launch -m tooldojo train ...`)."""

from tooldojo.cli import main

if __name__ == "__main__":
    main()
