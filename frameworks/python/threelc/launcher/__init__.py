"""threelcrun, the launcher: hosts and rank placement, the command line, the ranks'
environment, the ssh command of a remote rank, the rank processes and their output, the guard
that stops local ranks when threelcrun dies, and the job that runs them all. ``main.main`` is
the command: the console script ``threelcrun`` of an installed threelc, and
``tools/threelcrun`` in a checkout. Standard library only and runs on any python3 >= 3.9:
importing it loads neither libthreelc.so nor numpy (``threelc/__init__.py`` loads nothing)."""

PROG = "threelcrun"
