/** The environment the test runner gives every test file: MEMORY_CONFIG empty (no config file). */
export declare const testProcessEnv: (env: NodeJS.ProcessEnv) => NodeJS.ProcessEnv;
