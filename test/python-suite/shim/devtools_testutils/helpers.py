def is_live():
    """Whether the tests run against a live account (test_config.py sets is_live._cache)."""
    return getattr(is_live, "_cache", False)
