// The job API's errors.
import { FloeError } from '../core/errors.js';

/** The job file or its builder misuses the API: says what was expected, what was found, and what to do. */
export class InvalidJobDefinitionError extends FloeError {
  constructor(message: string) {
    super('INVALID_JOB_DEFINITION', message);
  }
}
