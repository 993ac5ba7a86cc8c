// The status page's build: one HTML file and its hashed assets in
// shells/native/statuspage/dist, embedded in the plait binary (go build needs no npm).
// Relative paths, so the page works behind a proxy under any prefix.
import { defineConfig } from 'vite';

export default defineConfig({
  base: './',
  build: {
    outDir: process.env.PLAIT_PAGE_OUT || '../../shells/native/statuspage/dist',
    emptyOutDir: true,
    chunkSizeWarningLimit: 1000,
    sourcemap: false,
  },
});
