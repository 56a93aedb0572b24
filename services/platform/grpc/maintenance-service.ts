/**
 * memory.v1.Maintenance's handlers over any MemoryMaintenance (the query service's store
 * maintenance, whose erasure also names the erased records: they go back to the gateway): consolidation, version history and erasure for the caller's tenant, authorized,
 * parsed with the HTTP rules and counted as Memory's calls are.
 */
import type { StoreSideMaintenance } from "../../core/maintenance.ts";
import type { GrpcCallMetrics } from "./call-metrics.ts";
import type { MaintenanceServer } from "./generated/memory.ts";
import { consolidationReportToWire, erasureReportToWire, historyToWire } from "./maintenance-mapping.ts";
import { parseFlushRequest, parseGetRecordRequest } from "./request-parsing.ts";
import { type CallServingDeps, callServing } from "./serve-call.ts";
import { NotFound } from "./status-mapping.ts";

export interface MaintenanceServiceDeps extends CallServingDeps {
  maintenance: StoreSideMaintenance;
}

export const maintenanceServiceImplementation = (
  deps: MaintenanceServiceDeps,
  callMetrics?: GrpcCallMetrics,
): MaintenanceServer => {
  const { maintenance } = deps;
  const serve = callServing(deps, callMetrics);
  return {
    consolidate: (call, callback) =>
      serve("Consolidate", call, callback, async (tenant) =>
        consolidationReportToWire(await maintenance.consolidate(tenant)),
      ),
    history: (call, callback) =>
      serve("History", call, callback, async (tenant) => {
        const history = await maintenance.history(tenant, parseGetRecordRequest(call.request));
        if (!history) throw new NotFound("record not found");
        return historyToWire(history);
      }),
    erase: (call, callback) =>
      serve("Erase", call, callback, async (tenant) => {
        // The same rule as a flush's conversation: empty means the whole tenant.
        const conversation = parseFlushRequest(call.request);
        return erasureReportToWire(await maintenance.erase(tenant, conversation));
      }),
  };
};
