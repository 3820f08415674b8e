// The wasm exports of a filter plugin. A plugin's entry file re-exports
// them: export * from "<sdk>/assembly/exports/filter";
export { broker_abi_v1, broker_buffer, broker_init, broker_info, broker_selftest } from "../abi";
export { broker_filter, broker_filter_keys } from "../filter";
