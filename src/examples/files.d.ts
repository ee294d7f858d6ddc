/**
 * Types of the example files src/examples/manifest.ts imports `with { type: 'file' }`: Bun makes each import the
 * file's path (https://bun.com/docs/bundler/executables#embed-assets-files). Extensions Bun has no module type for.
 */
declare module '*.py' { const path: string; export default path; }
declare module '*.md' { const path: string; export default path; }
declare module '*.sh' { const path: string; export default path; }
declare module '*.svg' { const path: string; export default path; }
declare module '*.jsonl' { const path: string; export default path; }
declare module '*.sbatch' { const path: string; export default path; }
declare module '*.service' { const path: string; export default path; }
declare module '*Dockerfile' { const path: string; export default path; }
