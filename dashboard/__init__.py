"""Views of critical participation: the live Dash app and batch reports."""
