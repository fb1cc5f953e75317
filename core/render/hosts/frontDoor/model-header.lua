-- The front door's body-to-header stage (issue 30, hosts): json_to_metadata, before this filter, read
-- the request body's `model` into dynamic metadata; this puts it in the header the routes match, or
-- takes away a header of that name the client sent. The Lua filter's clear_route_cache (on) makes
-- Envoy select the route again after the change, before ext_proc asks the model's endpoint picker.
local NAMESPACE = "rbln-serving.model"
local HEADER = "x-gateway-base-model-name"

function envoy_on_request(handle)
  local read = handle:streamInfo():dynamicMetadata():get(NAMESPACE)
  local model = read and read["model"]
  -- Printable ASCII only, as served names are: anything else cannot be a header value, and routes nowhere.
  if type(model) == "string" and string.find(model, "^[!-~]+$") then
    handle:headers():replace(HEADER, model)
  else
    handle:headers():remove(HEADER)
  end
end
