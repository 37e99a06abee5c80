"""What the test suites share (tests/README.md lists the modules)."""
