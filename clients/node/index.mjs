// ESM entry point: the implementation is index.cjs (one copy, shared with require()).
import cjs from './index.cjs';

export const {
  ChangeFeedProcessor,
  estimate,
  findCfp,
  platformPackage,
  ChangeFeedError,
  OptionsError,
  BinaryNotFoundError,
  ProcessExitedError,
  ProtocolError,
  EngineError,
  EstimateError,
  PROTOCOL,
} = cjs;
export default cjs;
