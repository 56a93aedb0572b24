import { randomUUID } from "node:crypto";
import { QdrantVectorStore } from "../../services/core/adapters/qdrant/vector-store.ts";
import { runVectorStoreContract } from "./vector-store.contract.ts";

const url = process.env.QDRANT_URL;

runVectorStoreContract(
  "QdrantVectorStore",
  async () => {
    const collection = `contract_${randomUUID().replaceAll("-", "")}`;
    const options = { url: url as string, apiKey: process.env.QDRANT_API_KEY, collection };
    let store = new QdrantVectorStore(options);
    return {
      store,
      reopen: async () => {
        await store.close();
        store = new QdrantVectorStore(options);
        return store;
      },
      cleanup: async () => {
        await store.client.deleteCollection(collection).catch(() => undefined);
        await store.close();
      },
    };
  },
  { skip: url ? false : "QDRANT_URL not set: no Qdrant server can be installed from the package registries here" },
);
