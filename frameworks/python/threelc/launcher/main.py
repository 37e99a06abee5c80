"""The threelcrun command: parse the command line, run the job, exit with its status."""

import sys

from .job import Launcher
from .options import parse_args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return Launcher(args).run()
