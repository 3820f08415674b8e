// The AssemblyScript SDK for the broker's WASM plugins (ABI v1.3): import
// the API from here and re-export the wasm functions of your plugin's kind
// from exports/filter.ts or exports/transform.ts in the entry file.
export * from "./abi";
export * from "./filter";
export * from "./transform";
