"""One module per CLI subcommand (see harness/cli.py for the contract)."""
