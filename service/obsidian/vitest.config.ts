import path from "node:path";
import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: {
    // the one module replaced: Obsidian's API, by a small stub at its boundary
    alias: { obsidian: path.resolve(__dirname, "test/stub/obsidian.ts") },
  },
  test: {
    environment: "jsdom",
    globalSetup: ["test/server.ts"],
    setupFiles: ["test/setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 180_000,
  },
});
