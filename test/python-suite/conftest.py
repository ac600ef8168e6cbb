# Points the azure-cosmos SDK's own tests (tests/, unchanged) at cfp emulator.
#
# run.sh sets ACCOUNT_HOST to the emulator's https endpoint on a free port and REQUESTS_CA_BUNDLE
# to its certificate. tests/test_config.py treats only https://localhost:8081/ as the emulator
# (key credential, is_live off) and turns TLS verification off in its shared ConnectionPolicy;
# this file, loaded by pytest before tests/conftest.py and the test modules, makes the same
# choices for the other port, and keeps verification on (the certificate is trusted instead).
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(_here, "tests"), os.path.join(_here, "shim")]

if not os.environ.get("ACCOUNT_HOST"):
    raise RuntimeError("ACCOUNT_HOST is not set: run the suite through test/python-suite/run.sh")

import test_config  # noqa: E402
from devtools_testutils.helpers import is_live  # noqa: E402

_config = test_config.TestConfig
_config.is_emulator = True
_config.credential = _config.masterKey
_config.credential_async = _config.masterKey
_config.connectionPolicy.DisableSSLVerification = False
is_live._cache = False
