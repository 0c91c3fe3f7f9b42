"""`python -m hwmodel` is the `hwmodel` command."""

from hwmodel.cli import main

main()
