declare module '*.css';
// The providers' sample payloads (src/sources/samples), bundled by esbuild's JSON loader.
declare module '*.json' {
  const value: unknown;
  export default value;
}
