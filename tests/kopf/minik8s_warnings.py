"""A pytest plugin for kopf's suite against minik8s (loaded with `-p`).

kopf's conftest makes every warning an error. One warning is not about the
cluster: asyncio's "unclosed transport" for a socket that the operator's
own event loop (KopfRunner's thread) closed before an SSL shutdown
finished, raised in whichever test is running when Python collects it.
It is kept visible (pytest's warnings summary) rather than made an error.
Only that one: every other warning stays an error.
"""

import pytest

# action:message:category, the message a regular expression matched at the
# start ("." for the colon, which would split the fields).
UNCLOSED_TRANSPORT = (
    "always:Exception ignored in. <function _SelectorTransport[.]__del__ "
    ":pytest.PytestUnraisableExceptionWarning"
)


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    # Last, so that it comes after kopf's `error` and takes precedence.
    config.addinivalue_line("filterwarnings", UNCLOSED_TRANSPORT)
