// The heap keyed state backend against the KeyedStateBackend contract.
import { describeKeyedStateBackendContract } from '../../contracts/keyed-state-backend.contract.js';
import { HeapKeyedStateBackend } from '../../../runtime/task/state/heap-keyed-state-backend.js';

describeKeyedStateBackendContract('heap', (options) => new HeapKeyedStateBackend(options));
