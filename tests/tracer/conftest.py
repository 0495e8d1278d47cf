import sys
from pathlib import Path

# Test modules here import their shared helpers (eventlog_support) by name.
sys.path.insert(0, str(Path(__file__).parent))
