"""pytest configuration for the queen-mq compatibility scenarios."""

from compat import CLIENT_VERSION, QUEEN_URL


def pytest_report_header(config):
    return [f"queen-mq client {CLIENT_VERSION} against broker {QUEEN_URL or '<QUEEN_URL not set>'}"]
