// Provides what the SDK tests' _testConfig.ts injects, from the environment run.sh sets: the
// endpoint and key of the cfp emulator under test. Unlike the SDK's own global setup this one
// never turns TLS verification off: run.sh makes Node trust the emulator's certificate
// (NODE_EXTRA_CA_CERTS).
export default function ({ provide }) {
  const endpoint = process.env.ACCOUNT_HOST;
  const key = process.env.ACCOUNT_KEY;
  if (!endpoint || !key) {
    throw new Error("ACCOUNT_HOST and ACCOUNT_KEY must name the emulator (run.sh sets them)");
  }
  provide("cosmosEndpoint", endpoint);
  provide("cosmosMasterKey", key);
  // No resource-token key: the permission tests that use it fail, and are listed.
  provide("cosmosUserSasTokenKey", "");
  // Skips the tests of the compute gateway (a second emulator port, 8903), which cfp does not have.
  provide("skipTestForSignOff", true);
  provide("emulatorUnavailable", false);
  // Skips the tests of the Windows emulator's preview features (vector and full-text search).
  provide("linuxEmulator", true);
}
