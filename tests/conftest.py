from pathlib import Path

pytest_plugins = ["pytester"]

#: the tests the quick tier leaves out (scripts/quick_tier.py writes it from a measured run)
HEAVY = Path(__file__).with_name("heavy_tests.txt")


def pytest_addoption(parser):
    parser.addoption(
        "--quick",
        action="store_true",
        help="the quick tier (./run test --quick): every module, its slowest tests left out (tests/heavy_tests.txt)",
    )


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--quick") or not HEAVY.exists():
        return
    heavy = {ln.strip() for ln in HEAVY.read_text().splitlines() if ln.strip() and not ln.startswith("#")}
    kept = [it for it in items if it.nodeid not in heavy]
    config.hook.pytest_deselected(items=[it for it in items if it.nodeid in heavy])
    items[:] = kept
