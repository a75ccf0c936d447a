"""pytest's side of the end-to-end tests: its hooks. What
the tests share is in harness.py."""


def pytest_terminal_summary(terminalreporter):
    """Every skipped test by name, with its reason (pytest -q folds them
    by location, which hides which tests did not run)."""
    for rep in terminalreporter.stats.get("skipped", []):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else ""
        terminalreporter.write_line(f"SKIPPED {rep.nodeid}: "
                                    f"{reason.removeprefix('Skipped: ')}")
