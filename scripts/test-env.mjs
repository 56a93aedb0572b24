// The environment the test runner gives every test file (and, inherited, every process a test
// starts): MEMORY_CONFIG empty, so no test reads a memory.config.json that lies in the working
// directory or one the developer's shell points at. A test that wants a file passes its own env.
export const testProcessEnv = (env) => ({ ...env, MEMORY_CONFIG: "" });
