"""What a user meets: the command line and the reports (terminal, JSON, HTML)."""
