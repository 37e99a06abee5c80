"""The launcher's environment variables, declared once: the one it reads and the ones it sets
for the ranks beyond the engine's own. Rows have the fields of threelc.settings.Setting (name,
layer, type, default, accepted, meaning, details); tools/dev/settings_doc.py writes them into
README.md and docs/CONFIGURATION.md. Standard library only, as the rest of the launcher."""

SETTINGS = (
    ("THREELC_SSH_PORT", "launcher", "integer", "", "a port from 1 to 65535",
     "threelcrun: ssh port of remote hosts (as `--ssh-port`); unset: ssh's own default", ""),
    ("THREELC_CROSS_RANK", "launcher", "integer", "", "set by threelcrun",
     "set by threelcrun for scripts: the index of this rank's host among the hosts in use",
     "set by threelcrun for scripts: the index of this rank's host among the hosts in use (not "
     "read by the engine, which derives `cross_rank` from the ranks' host names, "
     "`THREELC_HOSTNAME`)"),
    ("THREELC_CROSS_SIZE", "launcher", "integer", "", "set by threelcrun",
     "set by threelcrun for scripts: the number of hosts in use", ""),
)
