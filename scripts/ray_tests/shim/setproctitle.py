"""A stand-in for the setproctitle package (Ray's dependency, used by its tests to read worker
process titles, a Ray internal): using it skips the test."""


def _skip(*args, **kwargs):
    import pytest
    pytest.skip("internal: setproctitle (Ray's worker process titles)")


setproctitle = getproctitle = _skip
