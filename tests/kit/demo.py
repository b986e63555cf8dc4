"""What the demo's tests share: calc.py's `average` line with the sample's bug, and fixed."""

BUGGY = "    return sum(values) / (len(values) - 1)\n"
FIXED = "    return sum(values) / len(values)\n"
