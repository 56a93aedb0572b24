/**
 * The Neo4j the contract and integration tests connect to, from the variables
 * `eval "$(bash infra/env.sh)"` exports: one place for their names, their defaults and the reason a
 * test skips without them. Stage processes a test starts read the same variables through
 * loadConfig (services/core/config.ts).
 */
import type { Neo4jConnectionOptions } from "../../services/core/adapters/neo4j/driver.ts";

export type TestNeo4jConnection = Required<Pick<Neo4jConnectionOptions, "uri" | "user" | "password">>;

const NOT_SET = 'NEO4J_URI not set: npm run infra:up; eval "$(bash infra/env.sh)"';

/** Why a test that needs Neo4j is skipped, or false when NEO4J_URI is set. */
export const neo4jSkip: string | false = process.env.NEO4J_URI ? false : NOT_SET;

/** The test Neo4j's connection options; throws without NEO4J_URI (for tests that skip on neo4jSkip). */
export const neo4jConnection = (): TestNeo4jConnection => {
  const uri = process.env.NEO4J_URI;
  if (!uri) throw new Error(NOT_SET);
  return { uri, user: process.env.NEO4J_USER ?? "neo4j", password: process.env.NEO4J_PASSWORD ?? "" };
};
