# Test modules here import their shared helpers (eventlog_support) by name.
