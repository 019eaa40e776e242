"""A pytest plugin for kopf's suite against minik8s (loaded with `-p`).

kopf's conftest makes every warning an error. One warning is about the
client's own teardown, not the cluster: when an example's operator stops,
aiohttp closes the connections of its cancelled watch streams without
waiting for them (they are no longer in its pool), each one's SSL shutdown
needs one more answer from the server, and KopfRunner closes the
operator's event loop a few iterations later. A transport whose answer
came after that is collected unclosed ("unclosed transport"), in whichever
test is running when Python collects it. Traced with a hook on asyncio's
transports: every one was a watch connection in the SSL SHUTDOWN state,
closed by aiohttp's release of a stream that was not read to its end; the
apiserver answers a client's close_notify within one 50 ms polling step
(measured idle, mid-watch and with the reader paused).
They are kept visible (pytest's warnings summary) rather than made errors.
Only those: every other warning stays an error.
"""

import pytest

# action:message:category, each message a regular expression matched at the
# start ("." for a colon, which would split the fields). The transport, and
# the connected socket under it when Python's collector finalizes that one
# first (same teardown, same cycle of objects).
UNCLOSED = (
    "always:Exception ignored in. <function _SelectorTransport[.]__del__ "
    ":pytest.PytestUnraisableExceptionWarning",
    "always:Exception ignored in. <socket[.]socket fd=[0-9]+, family=[0-9]+, type=1, proto=[0-9]+, laddr=.*, raddr="
    ":pytest.PytestUnraisableExceptionWarning",
)


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    # Last, so that they come after kopf's `error` and take precedence.
    for line in UNCLOSED:
        config.addinivalue_line("filterwarnings", line)
