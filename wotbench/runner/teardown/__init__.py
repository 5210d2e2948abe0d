"""After the test, on every path: removing what a run created, and finding what earlier runs
left behind."""
