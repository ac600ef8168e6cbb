def get_credential(**kwargs):
    """The suite's Microsoft Entra ID credential for a live account: none against cfp emulator.

    test_config.py asks for it at import when ACCOUNT_HOST is not https://localhost:8081/; the
    suite's conftest.py then puts the account key in its place.
    """
    return None
