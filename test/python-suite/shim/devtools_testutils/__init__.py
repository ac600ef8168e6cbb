# A stand-in for the azure-sdk-for-python repository's devtools_testutils (tools/azure-sdk-tools,
# not published on PyPI), with only what tests/test_config.py imports. Against cfp emulator the
# suite authenticates with the account key: conftest.py (beside this directory) sets it.
