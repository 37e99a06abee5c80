"""threelcrun's parts (tools/threelcrun is the command): hosts and rank placement, the command
line, the ranks' environment, the ssh command of a remote rank, the rank processes and their
output, the guard that stops local ranks when threelcrun dies, and the job that runs them all.
Standard library only; runs on any python3 >= 3.9."""

PROG = "threelcrun"
