# The MIT License (MIT)
# Copyright (c) Microsoft Corporation. All rights reserved.

import collections
import asyncio
import logging
import os
import random
import time
import unittest
import uuid

from azure.core.exceptions import AzureError, ServiceRequestError, ServiceResponseError, ClientAuthenticationError
from azure.core.pipeline.policies import AsyncRetryPolicy, RetryPolicy
from azure.cosmos._change_feed.feed_range_internal import FeedRangeInternalEpk
from azure.cosmos._retry_utility import _has_database_account_header, _has_read_retryable_headers, _configure_timeout
from azure.cosmos._routing.routing_range import Range
from azure.cosmos.cosmos_client import CosmosClient
from azure.cosmos.exceptions import CosmosHttpResponseError
from azure.cosmos.http_constants import StatusCodes, HttpHeaders
from azure.cosmos.partition_key import (PartitionKey, _PartitionKeyKind, _PartitionKeyVersion, _Undefined,
                                        NonePartitionKeyValue)
from azure.cosmos import (ContainerProxy, DatabaseProxy, documents, exceptions,
                          http_constants)
from devtools_testutils.azure_recorded_testcase import get_credential
from devtools_testutils.helpers import is_live
from typing import Sequence, Type, Union

try:
    import urllib3

    urllib3.disable_warnings()
except:
    print("no urllib3")

SPLIT_TIMEOUT = 60*10  # timeout test at 10 minutes
SLEEP_TIME = 30  # sleep for 30 seconds

# The live tests run against fixed, long-lived accounts that are shared with other
# language SDKs and with concurrent runs of this suite. Databases are the only
# account-scoped namespace we control, so every database this suite creates carries a
# prefix identifying the run that owns it. That keeps concurrent runs from colliding and
# lets cleanup delete only what a given run created.
RESOURCE_PREFIX = "PythonSDKTest"


def _build_run_id():
    # Build.BuildId is shared by every matrix leg of one pipeline run, which is what an
    # out-of-band janitor matches on; the random suffix keeps parallel legs distinct.
    build_id = os.getenv('BUILD_BUILDID')
    suffix = uuid.uuid4().hex[:8]
    return "{}-{}".format(build_id, suffix) if build_id else suffix


RUN_ID = _build_run_id()


def unique_database_id(label=""):
    """Build a database id owned by this test run.

    Format: ``PythonSDKTest-<run id>-<label>-<random>``. Callers that need particular
    characters in the id (unicode, leading spaces) can embed this in a larger id; only
    the prefix is required for ownership.
    """
    parts = [RESOURCE_PREFIX, RUN_ID]
    if label:
        parts.append(label)
    parts.append(uuid.uuid4().hex)
    return "-".join(parts)


def set_environment_variables(**overrides):
    """Apply environment variable overrides and return the values they replaced.

    Tests that toggle SDK feature flags must put the process back exactly as they found
    it, because several of those flags are also set for the whole job by the pipeline.
    Restoring an assumed default instead of the captured value silently disables the
    feature under test for everything that runs later in the same process.

    Pass a ``None`` value to unset a variable. Hand the return value to
    :func:`restore_environment_variables` from a ``finally`` block.
    """
    previous = {name: os.environ.get(name) for name in overrides}
    restore_environment_variables(overrides)
    return previous


def restore_environment_variables(previous):
    """Reapply the environment variable values captured by :func:`set_environment_variables`."""
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# The live-test accounts are long lived and shared with concurrent runs of this suite and
# with other language SDKs' CI, so the account control plane is a contended resource:
# creating or deleting a database or container can fail purely because someone else is
# busy on the same account. The SDK's own throttle retry gives up after ~30s, which is not
# enough headroom for suite setup and teardown on a busy account.
CONTROL_PLANE_MAX_ATTEMPTS = 20
CONTROL_PLANE_MAX_BACKOFF_SECONDS = 15
# Retried: request timeout, throttled, retry-with, internal error, service unavailable.
# Deliberately absent: 400, 401, 403, 404, 409. Those describe the request itself, so
# negative tests that assert on them must keep failing fast.
CONTROL_PLANE_RETRY_STATUS_CODES = frozenset({408, 429, 449, 500, 503})


def _control_plane_backoff(attempt, error):
    """Seconds to wait before retrying, preferring the service's own hint."""
    headers = getattr(error, "headers", None) or {}
    for header in (HttpHeaders.RetryAfterInMilliseconds, HttpHeaders.RetryAfter):
        raw = headers.get(header)
        if raw is None:
            continue
        try:
            hinted = float(raw) / 1000 if header == HttpHeaders.RetryAfterInMilliseconds else float(raw)
        except (TypeError, ValueError):
            continue
        return min(max(hinted, 0.1), CONTROL_PLANE_MAX_BACKOFF_SECONDS)
    backoff = min(0.5 * (2 ** attempt), CONTROL_PLANE_MAX_BACKOFF_SECONDS)
    # Jitter so that parallel matrix legs retrying the same account don't stay in lockstep.
    return backoff * (0.5 + random.random() / 2)


def _should_retry_control_plane(error, attempt):
    return (error.status_code in CONTROL_PLANE_RETRY_STATUS_CODES
            and attempt < CONTROL_PLANE_MAX_ATTEMPTS - 1)


def retry_control_plane(operation, *args, **kwargs):
    """Run a control-plane operation, retrying transient service-side failures."""
    for attempt in range(CONTROL_PLANE_MAX_ATTEMPTS):
        try:
            return operation(*args, **kwargs)
        except exceptions.CosmosHttpResponseError as error:
            if not _should_retry_control_plane(error, attempt):
                raise
            time.sleep(_control_plane_backoff(attempt, error))
    raise AssertionError("unreachable")  # pragma: no cover


async def retry_control_plane_async(operation, *args, **kwargs):
    """Async counterpart of :func:`retry_control_plane`."""
    for attempt in range(CONTROL_PLANE_MAX_ATTEMPTS):
        try:
            return await operation(*args, **kwargs)
        except exceptions.CosmosHttpResponseError as error:
            if not _should_retry_control_plane(error, attempt):
                raise
            await asyncio.sleep(_control_plane_backoff(attempt, error))
    raise AssertionError("unreachable")  # pragma: no cover


class TestConfig(object):
    local_host = 'https://localhost:8081/'
    # [SuppressMessage("Microsoft.Security", "CS002:SecretInNextLine", Justification="Cosmos DB Emulator Key")]
    masterKey = os.getenv('ACCOUNT_KEY',
                          'C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==')
    host = os.getenv('ACCOUNT_HOST', local_host)
    connection_str = os.getenv('ACCOUNT_CONNECTION_STR', 'AccountEndpoint={};AccountKey={};'.format(host, masterKey))

    connectionPolicy = documents.ConnectionPolicy()
    connectionPolicy.DisableSSLVerification = True
    is_emulator = host == local_host
    is_live._cache = True if not is_emulator else False
    credential = masterKey if is_emulator else get_credential()
    credential_async = masterKey if is_emulator else get_credential(is_async=True)
    data_auth_mode = os.getenv('COSMOS_TEST_DATA_AUTH_MODE', 'key').strip().lower()
    if data_auth_mode not in ('key', 'aad'):
        raise ValueError(
            "Unknown COSMOS_TEST_DATA_AUTH_MODE: {!r}. Expected 'key' or 'aad'.".format(data_auth_mode)
        )

    @classmethod
    def create_data_client(cls, **kwargs):
        """Return a data-plane Cosmos client using AAD when configured, else key auth.

        Extra ``**kwargs`` are forwarded to the ``CosmosClient`` constructor so test
        files that need client-construction options (e.g. ``no_response_on_write=True``)
        can opt in without bypassing the AAD/key selector.
        """
        if cls.data_auth_mode == 'aad':
            return CosmosClient(cls.host, cls.credential, **kwargs)
        return CosmosClient(cls.host, cls.masterKey, **kwargs)

    @classmethod
    def create_data_client_for_endpoint(cls, endpoint, **kwargs):
        """Return a sync data-plane Cosmos client for a specific endpoint.

        Uses AAD when configured via ``COSMOS_TEST_DATA_AUTH_MODE=aad`` and key auth
        otherwise, matching :meth:`create_data_client` behavior while allowing
        endpoint overrides for regional-endpoint tests.
        """
        resolved_endpoint = endpoint or cls.host
        if cls.data_auth_mode == 'aad':
            return CosmosClient(resolved_endpoint, cls.credential, **kwargs)
        return CosmosClient(resolved_endpoint, cls.masterKey, **kwargs)

    @classmethod
    def create_data_client_async(cls, **kwargs):
        """Return an async data-plane Cosmos client using AAD when configured, else key auth.

        Lifecycle (important):
            The returned ``azure.cosmos.aio.CosmosClient`` is **not entered**. The caller
            owns its lifecycle and MUST either:
              * use it as an async context manager
                (``async with test_config.TestConfig.create_data_client_async() as c: ...``), or
              * call ``await client.__aenter__()`` after construction and ``await client.close()``
                in teardown (the pattern used by ``unittest.IsolatedAsyncioTestCase`` test
                files such as ``test_query_async.py``).

            Failing to close the client leaks the underlying ``aiohttp`` session and can
            surface as ``Unclosed client session`` warnings or socket exhaustion in long
            test runs.

        Extra ``**kwargs`` are forwarded to the async ``CosmosClient`` constructor so test
        files that need client-construction options (e.g. ``multiple_write_locations=True``)
        can opt in without bypassing the AAD/key selector.
        """
        from azure.cosmos.aio import CosmosClient as AsyncCosmosClient

        if cls.data_auth_mode == 'aad':
            return AsyncCosmosClient(cls.host, cls.credential_async, **kwargs)
        return AsyncCosmosClient(cls.host, cls.masterKey, **kwargs)

    @classmethod
    def create_data_client_async_for_endpoint(cls, endpoint, **kwargs):
        """Return an async data-plane Cosmos client for a specific endpoint.

        Uses AAD when configured via ``COSMOS_TEST_DATA_AUTH_MODE=aad`` and key auth
        otherwise, matching :meth:`create_data_client_async` behavior while allowing
        endpoint overrides for regional-endpoint tests.
        """
        from azure.cosmos.aio import CosmosClient as AsyncCosmosClient

        resolved_endpoint = endpoint or cls.host
        if cls.data_auth_mode == 'aad':
            return AsyncCosmosClient(resolved_endpoint, cls.credential_async, **kwargs)
        return AsyncCosmosClient(resolved_endpoint, cls.masterKey, **kwargs)

    @classmethod
    def create_test_clients(cls, database_id, **kwargs):
        """Return ``(key_client, key_db, data_client, data_db)`` for tests that need
        both a control-plane (key-auth) and a data-plane (AAD-or-key) client.

        Removes the 4-line key+data-client setUp boilerplate. Typical use::

            cls.key_client, cls.key_db, cls.client, cls.created_db = (
                test_config.TestConfig.create_test_clients(cls.TEST_DATABASE_ID))

        Extra ``**kwargs`` are forwarded to BOTH client constructors (use-cases:
        ``multiple_write_locations=True`` for circuit-breaker tests). For per-client
        construction options (e.g. custom ``transport`` for fault injection), construct
        the clients manually instead of using this factory.
        """
        key_client = CosmosClient(cls.host, cls.masterKey, **kwargs)
        key_db = key_client.get_database_client(database_id)
        data_client = cls.create_data_client(**kwargs)
        data_db = data_client.get_database_client(database_id)
        return key_client, key_db, data_client, data_db

    @classmethod
    def create_test_clients_async(cls, database_id, **kwargs):
        """Async equivalent of :meth:`create_test_clients`.

        Returns ``(key_client, key_db, data_client, data_db)`` where both clients
        are async ``azure.cosmos.aio.CosmosClient`` instances. Callers own the
        lifecycle of both clients and MUST close them in teardown
        (see :meth:`create_data_client_async` for details).
        """
        from azure.cosmos.aio import CosmosClient as AsyncCosmosClient

        key_client = AsyncCosmosClient(cls.host, cls.masterKey, **kwargs)
        key_db = key_client.get_database_client(database_id)
        data_client = cls.create_data_client_async(**kwargs)
        data_db = data_client.get_database_client(database_id)
        return key_client, key_db, data_client, data_db

    global_host = os.getenv('GLOBAL_ACCOUNT_HOST', host)
    write_location_host = os.getenv('WRITE_LOCATION_HOST', host)
    read_location_host = os.getenv('READ_LOCATION_HOST', host)
    read_location2_host = os.getenv('READ_LOCATION_HOST2', host)
    global_masterKey = os.getenv('GLOBAL_ACCOUNT_KEY', masterKey)

    write_location = os.getenv('WRITE_LOCATION', host)
    read_location = os.getenv('READ_LOCATION', host)
    read_location2 = os.getenv('READ_LOCATION2', host)

    THROUGHPUT_FOR_5_PARTITIONS = 30000
    THROUGHPUT_FOR_2_PARTITIONS = 12000
    THROUGHPUT_FOR_1_PARTITION = 400

    TEST_DATABASE_ID = os.getenv('COSMOS_TEST_DATABASE_ID', unique_database_id("Shared"))

    TEST_SINGLE_PARTITION_CONTAINER_ID = "SinglePartitionTestContainer-" + str(uuid.uuid4())
    TEST_MULTI_PARTITION_CONTAINER_ID = "MultiPartitionTestContainer-" + str(uuid.uuid4())
    TEST_SINGLE_PARTITION_PREFIX_PK_CONTAINER_ID = "SinglePartitionWithPrefixPKTestContainer-" + str(uuid.uuid4())
    TEST_MULTI_PARTITION_PREFIX_PK_CONTAINER_ID = "MultiPartitionWithPrefixPKTestContainer-" + str(uuid.uuid4())

    TEST_CONTAINER_PARTITION_KEY = "pk"
    TEST_CONTAINER_PREFIX_PARTITION_KEY = ["pk1", "pk2"]
    TEST_CONTAINER_PREFIX_PARTITION_KEY_PATH = ['/pk1', '/pk2']

    # these will be populated by the get_account_info method
    WRITE_LOCATION = ""
    # some default value that is needed for emulator tests
    READ_LOCATION = "West US"

    @classmethod
    def get_account_info(cls, client: CosmosClient):
        account_info = client.get_database_account()
        cls.WRITE_LOCATION = account_info.WritableLocations[0]["name"]
        if len(account_info.ReadableLocations) > 1:
            cls.READ_LOCATION = account_info.ReadableLocations[1]["name"]

    @classmethod
    def create_database_if_not_exist(cls, client):
        # type: (CosmosClient) -> DatabaseProxy
        test_database = retry_control_plane(client.create_database_if_not_exists,
                                            cls.TEST_DATABASE_ID,
                                            offer_throughput=cls.THROUGHPUT_FOR_1_PARTITION)
        return test_database

    @classmethod
    def create_single_partition_container_if_not_exist(cls, client):
        # type: (CosmosClient) -> ContainerProxy
        database = cls.create_database_if_not_exist(client)
        document_collection = retry_control_plane(
            database.create_container_if_not_exists,
            id=cls.TEST_SINGLE_PARTITION_CONTAINER_ID,
            partition_key=PartitionKey(path='/' + cls.TEST_CONTAINER_PARTITION_KEY, kind='Hash'),
            offer_throughput=cls.THROUGHPUT_FOR_1_PARTITION)
        return document_collection

    @classmethod
    def create_multi_partition_container_if_not_exist(cls, client):
        # type: (CosmosClient) -> ContainerProxy
        database = cls.create_database_if_not_exist(client)
        document_collection = retry_control_plane(
            database.create_container_if_not_exists,
            id=cls.TEST_MULTI_PARTITION_CONTAINER_ID,
            partition_key=PartitionKey(path='/' + cls.TEST_CONTAINER_PARTITION_KEY, kind='Hash'),
            offer_throughput=cls.THROUGHPUT_FOR_5_PARTITIONS)
        return document_collection

    @classmethod
    def create_single_partition_prefix_pk_container_if_not_exist(cls, client):
        # type: (CosmosClient) -> ContainerProxy
        database = cls.create_database_if_not_exist(client)
        document_collection = retry_control_plane(
            database.create_container_if_not_exists,
            id=cls.TEST_SINGLE_PARTITION_PREFIX_PK_CONTAINER_ID,
            partition_key=PartitionKey(path=cls.TEST_CONTAINER_PREFIX_PARTITION_KEY_PATH, kind='MultiHash'),
            offer_throughput=cls.THROUGHPUT_FOR_1_PARTITION)
        return document_collection

    @classmethod
    def create_multi_partition_prefix_pk_container_if_not_exist(cls, client):
        # type: (CosmosClient) -> ContainerProxy
        database = cls.create_database_if_not_exist(client)
        document_collection = retry_control_plane(
            database.create_container_if_not_exists,
            id=cls.TEST_MULTI_PARTITION_PREFIX_PK_CONTAINER_ID,
            partition_key=PartitionKey(path=cls.TEST_CONTAINER_PREFIX_PARTITION_KEY_PATH, kind='MultiHash'),
            offer_throughput=cls.THROUGHPUT_FOR_5_PARTITIONS)
        return document_collection

    @classmethod
    def try_delete_database(cls, client):
        # type: (CosmosClient) -> None
        cls.try_delete_database_with_id(client, cls.TEST_DATABASE_ID)

    @classmethod
    def try_delete_database_with_id(cls, client, database_id):
        # type: (CosmosClient, str) -> None
        try:
            retry_control_plane(client.delete_database, database_id)
        except exceptions.CosmosHttpResponseError as e:
            if e.status_code != StatusCodes.NOT_FOUND:
                raise e

    @classmethod
    async def _validate_distinct_on_different_types_and_field_orders(cls, collection, query, expected_results):
        query_iterable = collection.query_items(query)
        results = [item async for item in query_iterable]
        for i in range(len(expected_results)):
            assert results[i] in expected_results

    @classmethod
    def _get_query_result_string(cls, query_result, fields):
        if type(query_result) is not dict:
            return str(query_result)
        res = str(query_result[fields[0]] if fields[0] in query_result else None)
        if len(fields) == 2:
            res = res + "," + str(query_result[fields[1]] if fields[1] in query_result else None)

        return res

    @classmethod
    async def _validate_distinct(cls, created_collection, query, results, is_select, fields):
        query_iterable = created_collection.query_items(query=query)
        query_results = [item async for item in query_iterable]

        assert len(results) == len(query_results)
        query_results_strings = []
        result_strings = []
        for i in range(len(results)):
            query_results_strings.append(cls._get_query_result_string(query_results[i], fields))
            result_strings.append(str(results[i]))
        if is_select:
            query_results_strings = sorted(query_results_strings)
            result_strings = sorted(result_strings)
        assert result_strings == query_results_strings

    @classmethod
    def _pad_with_none(cls, documents_param, field):
        for doc in documents_param:
            if field not in doc:
                doc[field] = None
        return documents_param

    @classmethod
    def _get_distinct_docs(cls, documents_param, field1, field2, is_order_by_or_value):
        if field2 is None:
            res = collections.OrderedDict.fromkeys(doc[field1] for doc in documents_param)
            if is_order_by_or_value:
                res = filter(lambda x: False if x is None else True, res)
        else:
            res = collections.OrderedDict.fromkeys(str(doc[field1]) + "," + str(doc[field2]) for doc in documents_param)
        return list(res)

    @classmethod
    def _get_order_by_docs(cls, documents_param, field1, field2):
        if field2 is None:
            return sorted(documents_param, key=lambda d: (d[field1] is not None, d[field1]))
        else:
            return sorted(documents_param,
                          key=lambda d: (d[field1] is not None, d[field1], d[field2] is not None, d[field2]))

    @classmethod
    async def _validate_distinct_offset_limit(cls, created_collection, query, results):
        query_iterable = created_collection.query_items(query=query)
        assert list(map(lambda doc: doc['value'], [item async for item in query_iterable])) == results

    @classmethod
    async def _validate_offset_limit(cls, created_collection, query, results):
        query_iterable = created_collection.query_items(query=query)
        assert list(map(lambda doc: doc['pk'], [item async for item in query_iterable])) == results

    @staticmethod
    def trigger_split(container, throughput):
        print("Triggering a split in session token helpers")
        # Use a single control-plane attempt to avoid masking contention failures.
        container.replace_throughput(throughput)
        print(f"changed offer to {throughput}")
        print("--------------------------------")
        print("Waiting for split to complete")
        start_time = time.time()

        while True:
            offer = container.get_throughput()
            if offer.properties['content'].get('isOfferReplacePending', False):
                if time.time() - start_time > SPLIT_TIMEOUT:  # timeout test at 10 minutes
                    raise unittest.SkipTest("Partition split didn't complete in time")
                else:
                    print("Waiting for split to complete")
                    time.sleep(SLEEP_TIME)
            else:
                break
        print("Split in session token helpers has completed")

    @staticmethod
    async def trigger_split_async(container, throughput):
        print("Triggering a split in session token helpers")
        # Use a single control-plane attempt to avoid masking contention failures.
        await container.replace_throughput(throughput)
        print(f"changed offer to {throughput}")
        print("--------------------------------")
        print("Waiting for split to complete")
        start_time = time.time()

        while True:
            offer = await container.get_throughput()
            if offer.properties['content'].get('isOfferReplacePending', False):
                if time.time() - start_time > SPLIT_TIMEOUT:  # timeout test at 10 minutes
                    raise unittest.SkipTest("Partition split didn't complete in time")
                else:
                    print("Waiting for split to complete")
                    await asyncio.sleep(SLEEP_TIME)
            else:
                break
        print("Split in session token helpers has completed")


def get_vector_indexing_policy(embedding_type):
    return {
        "indexingMode": "consistent",
        "includedPaths": [{"path": "/*"}],
        'excludedPaths': [{'path': '/"_etag"/?'}],
        "vectorIndexes": [
            {"path": "/embedding", "type": f"{embedding_type}"}
        ]
    }


def get_vector_embedding_policy(distance_function, data_type, dimensions):
    return {
        "vectorEmbeddings": [
            {
                "path": "/embedding",
                "dataType": f"{data_type}",
                "dimensions": dimensions,
                "distanceFunction": f"{distance_function}"
            }
        ]
    }


def get_full_text_indexing_policy(path):
    return {
        "indexingMode": "consistent",
        "includedPaths": [{"path": "/*"}],
        'excludedPaths': [{'path': '/"_etag"/?'}],
        "fullTextIndexes": [
            {"path": path}
        ]
    }


def get_full_text_policy(path):
    return {
        "defaultLanguage": "en-US",
        "fullTextPaths": [
            {
                "path": path,
                "language": "en-US"
            }
        ]
    }

def get_test_item():
    test_item = {
        'id': 'Item_' + str(uuid.uuid4()),
        'test_object': True,
        'lastName': 'Smith',
        'attr1': random.randint(0, 10)
    }
    return test_item

def pre_split_hook(response):
    request_headers = response.http_request.headers
    session_token = request_headers.get('x-ms-session-token')
    assert len(session_token) <= 20
    assert session_token.startswith('0')
    assert session_token.count(':') == 1
    assert session_token.count(',') == 0

def post_split_hook(response):
    request_headers = response.http_request.headers
    session_token = request_headers.get('x-ms-session-token')
    assert len(session_token) > 30
    assert len(session_token) < 60 # should only be 0-1 or 0-2, not 0-1-2
    assert session_token.startswith('0') is False
    assert session_token.count(':') == 2
    assert session_token.count(',') == 1

class ResponseHookCaller:
    def __init__(self):
        self.count = 0

    def __call__(self, *args, **kwargs):
        self.count += 1


class FakeResponse:
    def __init__(self, headers):
        self.headers = headers
        self.reason = "foo"
        self.status_code = "bar"


class FakePipelineResponse:
    def __init__(self, headers=None, status_code=200, message="test-message"):
        self.http_response = FakeHttpResponse(headers, status_code, message)


class FakeHttpResponse:
    def __init__(self, headers=None, status_code=200, message="test-message"):
        if headers is None:
            headers = {}
        self.headers = headers
        self.status_code = status_code
        self.reason = message

    def body(self):
        return None

def no_token_response_hook(raw_response):
    request_headers = raw_response.http_request.headers
    assert request_headers.get(HttpHeaders.SessionToken) is None

def token_response_hook(raw_response):
    request_headers = raw_response.http_request.headers
    assert request_headers.get(HttpHeaders.SessionToken) is not None


class MockConnectionRetryPolicy(RetryPolicy):
    def __init__(self, resource_type, error=None, **kwargs):
        self.resource_type = resource_type
        self.error = error
        self.counter = 0
        self.request_endpoints = []
        clean_kwargs = {k: v for k, v in kwargs.items() if v is not None}
        super().__init__(**clean_kwargs)

    def send(self, request):
        # background health checks could reset counter unintentionally
        if request.http_request.headers.get(http_constants.HttpHeaders.ThinClientProxyResourceType) == self.resource_type:
            self.counter = 0
        absolute_timeout = request.context.options.pop('timeout', None)
        per_request_timeout = request.context.options.pop('connection_timeout', 0)
        request_params = request.context.options.pop('request_params', None)
        global_endpoint_manager = request.context.options.pop('global_endpoint_manager', None)
        retry_error = None
        retry_active = True
        response = None
        retry_settings = self.configure_retries(request.context.options)
        while retry_active:
            start_time = time.time()
            try:
                # raise the passed in exception for the passed in resource + operation combination
                if request.http_request.headers.get(http_constants.HttpHeaders.ThinClientProxyResourceType) == self.resource_type:
                    self.request_endpoints.append(request.http_request.url)
                    if self.error:
                        raise self.error
                _configure_timeout(request, absolute_timeout, per_request_timeout)
                response = self.next.send(request)
                break
            except ClientAuthenticationError:  # pylint:disable=try-except-raise
                # the authentication policy failed such that the client's request can't
                # succeed--we'll never have a response to it, so propagate the exception
                raise
            except exceptions.CosmosClientTimeoutError as timeout_error:
                timeout_error.inner_exception = retry_error
                timeout_error.response = response
                timeout_error.history = retry_settings['history']
                raise
            except ServiceRequestError as err:
                retry_error = err
                # the request ran into a socket timeout or failed to establish a new connection
                # since request wasn't sent, raise exception immediately to be dealt with in client retry policies
                # This logic is based on the _retry.py file from azure-core
                if (not _has_database_account_header(request.http_request.headers)
                        and not request_params.healthy_tentative_location):
                    if retry_settings['connect'] > 0:
                        self.counter += 1
                        global_endpoint_manager.record_failure(request_params)
                        retry_active = self.increment(retry_settings, response=request, error=err)
                        if retry_active:
                            self.sleep(retry_settings, request.context.transport)
                            continue
                raise err
            except ServiceResponseError as err:
                retry_error = err
                # Only read operations can be safely retried with ServiceResponseError
                if (not _has_read_retryable_headers(request.http_request.headers) or
                        _has_database_account_header(request.http_request.headers) or
                        request_params.healthy_tentative_location):
                    raise err
                # This logic is based on the _retry.py file from azure-core
                if retry_settings['read'] > 0:
                    self.counter += 1
                    global_endpoint_manager.record_failure(request_params)
                    retry_active = self.increment(retry_settings, response=request, error=err)
                    if retry_active:
                        self.sleep(retry_settings, request.context.transport)
                        continue
                raise err
            except CosmosHttpResponseError as err:
                raise err
            except AzureError as err:
                retry_error = err
                if (_has_database_account_header(request.http_request.headers) or
                        request_params.healthy_tentative_location):
                    raise err
                if _has_read_retryable_headers(request.http_request.headers) and retry_settings['read'] > 0:
                    self.counter += 1
                    global_endpoint_manager.record_failure(request_params)
                    retry_active = self.increment(retry_settings, response=request, error=err)
                    if retry_active:
                        self.sleep(retry_settings, request.context.transport)
                        continue
                raise err
            finally:
                end_time = time.time()
                if absolute_timeout:
                    absolute_timeout -= (end_time - start_time)

        self.update_context(response.context, retry_settings)
        return response

class MockConnectionRetryPolicyAsync(AsyncRetryPolicy):

    def __init__(self, resource_type, error = None, **kwargs):
        self.resource_type = resource_type
        self.error = error
        self.counter = 0
        self.request_endpoints = []
        clean_kwargs = {k: v for k, v in kwargs.items() if v is not None}
        super(MockConnectionRetryPolicyAsync, self).__init__(**clean_kwargs)

    async def send(self, request):
        """Sends the PipelineRequest object to the next policy. Uses retry settings if necessary.
        Also enforces an absolute client-side timeout that spans multiple retry attempts.

        :param request: The PipelineRequest object
        :type request: ~azure.core.pipeline.PipelineRequest
        :return: Returns the PipelineResponse or raises error if maximum retries exceeded.
        :rtype: ~azure.core.pipeline.PipelineResponse
        :raises ~azure.core.exceptions.AzureError: Maximum retries exceeded.
        :raises ~azure.cosmos.exceptions.CosmosClientTimeoutError: Specified timeout exceeded.
        :raises ~azure.core.exceptions.ClientAuthenticationError: Authentication failed.
        """
        self.counter = 0
        absolute_timeout = request.context.options.pop('timeout', None)
        per_request_timeout = request.context.options.pop('connection_timeout', 0)
        request_params = request.context.options.pop('request_params', None)
        global_endpoint_manager = request.context.options.pop('global_endpoint_manager', None)
        retry_error = None
        retry_active = True
        response = None
        retry_settings = self.configure_retries(request.context.options)
        while retry_active:
            start_time = time.time()
            try:
                if request.http_request.headers.get(
                        http_constants.HttpHeaders.ThinClientProxyResourceType) == self.resource_type:
                    self.request_endpoints.append(request.http_request.url)
                    if self.error:
                        raise self.error
                _configure_timeout(request, absolute_timeout, per_request_timeout)
                response = await self.next.send(request)
                break
            except ClientAuthenticationError:  # pylint:disable=try-except-raise
                # the authentication policy failed such that the client's request can't
                # succeed--we'll never have a response to it, so propagate the exception
                raise
            except exceptions.CosmosClientTimeoutError as timeout_error:
                timeout_error.inner_exception = retry_error
                timeout_error.response = response
                timeout_error.history = retry_settings['history']
                raise
            except ServiceRequestError as err:
                retry_error = err
                # the request ran into a socket timeout or failed to establish a new connection
                # since request wasn't sent, raise exception immediately to be dealt with in client retry policies
                if (not _has_database_account_header(request.http_request.headers)
                        and not request_params.healthy_tentative_location):
                    if retry_settings['connect'] > 0:
                        self.counter += 1
                        await global_endpoint_manager.record_failure(request_params)
                        retry_active = self.increment(retry_settings, response=request, error=err)
                        if retry_active:
                            await self.sleep(retry_settings, request.context.transport)
                            continue
                raise err
            except ServiceResponseError as err:
                retry_error = err
                if (_has_database_account_header(request.http_request.headers) or
                        request_params.healthy_tentative_location):
                    raise err
                # Since this is ClientConnectionError, it is safe to be retried on both read and write requests
                try:
                    # pylint: disable=networking-import-outside-azure-core-transport
                    from aiohttp.client_exceptions import (
                        ClientConnectionError)
                    if (isinstance(err.inner_exception, ClientConnectionError)
                            or _has_read_retryable_headers(request.http_request.headers)):
                        # This logic is based on the _retry.py file from azure-core
                        if retry_settings['read'] > 0:
                            self.counter += 1
                            await global_endpoint_manager.record_failure(request_params)
                            retry_active = self.increment(retry_settings, response=request, error=err)
                            if retry_active:
                                await self.sleep(retry_settings, request.context.transport)
                                continue
                except ImportError:
                    raise err # pylint: disable=raise-missing-from
                raise err
            except CosmosHttpResponseError as err:
                raise err
            except AzureError as err:
                retry_error = err
                if (_has_database_account_header(request.http_request.headers) or
                        request_params.healthy_tentative_location):
                    raise err
                if _has_read_retryable_headers(request.http_request.headers) and retry_settings['read'] > 0:
                    self.counter += 1
                    retry_active = self.increment(retry_settings, response=request, error=err)
                    if retry_active:
                        await self.sleep(retry_settings, request.context.transport)
                        continue
                raise err
            finally:
                end_time = time.time()
                if absolute_timeout:
                    absolute_timeout -= (end_time - start_time)

        self.update_context(response.context, retry_settings)
        return response

def hash_partition_key_value(
        pk_value: Sequence[Union[None, bool, int, float, str, _Undefined, Type[NonePartitionKeyValue]]],
        kind: str = _PartitionKeyKind.HASH,
        version: int = _PartitionKeyVersion.V2,
    ):
    return PartitionKey._get_hashed_partition_key_string(
        pk_value=pk_value,
        kind=kind,
        version=version,
    )

def create_range(range_min: str, range_max: str, is_min_inclusive: bool = True, is_max_inclusive: bool = False):
    if range_max == range_min:
        range_max += "FF"
    return Range(
        range_min=range_min,
        range_max=range_max,
        isMinInclusive=is_min_inclusive,
        isMaxInclusive=is_max_inclusive,
    )

def create_feed_range_in_dict(feed_range):
    return FeedRangeInternalEpk(feed_range).to_dict()


class MockHandler(logging.Handler):

    def __init__(self):
        super(MockHandler, self).__init__()
        self.messages = []

    def reset(self):
        self.messages = []

    def emit(self, record):
        self.messages.append(record)
