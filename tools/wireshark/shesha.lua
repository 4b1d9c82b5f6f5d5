-- Wireshark / tshark dissector for the Shesha wire protocol, version 2 (docs/protocol.md).
--
-- Use:   tshark -X lua_script:tools/wireshark/shesha.lua -r capture.pcap
--   or copy this file into ~/.local/lib/wireshark/plugins/.
-- Port:  17717 by default; change with the preference "shesha.port" (-o shesha.port:NNNN).
--
-- Validation mirrors proto::decode in common/protocol.cpp: the first failed check, in the codec's
-- order, is shown in the field shesha.error (the codec's DecodeError name); every failed check gets
-- an expert-info entry (group Malformed).

local DEFAULT_PORT = 17717
local HEADER_SIZE = 48
local MAGIC = 0x5348
local VERSION = 2
local MAX_ELEMENTS = 2048
local CREDIT_BODY = 16
local FEEDBACK_BODY = 24

local shesha = Proto("shesha", "Shesha in-network gradient aggregation")

local msg_types = { [1] = "GRADIENT", [2] = "MODEL", [3] = "CREDIT", [4] = "FEEDBACK", [5] = "CREDIT_BATCH" }
local BATCH_ENTRY = 24       -- CREDIT_BATCH: worker_id, flags, 3 reserved, CREDIT body
local MAX_BATCH_ENTRIES = 56
local elem_types = { [0] = "NONE", [1] = "F32", [2] = "BF16" }

local f = {
    magic = ProtoField.uint16("shesha.magic", "Magic", base.HEX),
    version = ProtoField.uint8("shesha.version", "Version", base.DEC),
    type = ProtoField.uint8("shesha.type", "Type", base.DEC, msg_types),
    flags = ProtoField.uint8("shesha.flags", "Flags", base.HEX),
    flag_merged = ProtoField.bool("shesha.flags.merged", "Merged in network", 8, nil, 0x01),
    flag_ce = ProtoField.bool("shesha.flags.ce", "Congestion experienced", 8, nil, 0x02),
    flag_echo = ProtoField.bool("shesha.flags.echo", "Congestion echo", 8, nil, 0x04),
    flag_sender_merged = ProtoField.bool("shesha.flags.sender_merged", "Merged at sender", 8, nil, 0x08),
    flag_unknown = ProtoField.uint8("shesha.flags.unknown", "Unknown flag bits", base.HEX, nil, 0xF0),
    elem_type = ProtoField.uint8("shesha.elem_type", "Element type", base.DEC, elem_types),
    cluster = ProtoField.uint16("shesha.cluster", "Cluster", base.DEC),
    worker = ProtoField.uint32("shesha.worker", "Worker", base.DEC),
    model_version = ProtoField.uint32("shesha.model_version", "Model version", base.DEC),
    seq = ProtoField.uint32("shesha.seq", "Sequence", base.DEC),
    chunk_index = ProtoField.uint16("shesha.chunk_index", "Chunk index", base.DEC),
    chunk_count = ProtoField.uint16("shesha.chunk_count", "Chunk count", base.DEC),
    elem_count = ProtoField.uint16("shesha.elem_count", "Element count", base.DEC),
    contrib_count = ProtoField.uint16("shesha.contrib_count", "Contributions", base.DEC),
    ts_earliest = ProtoField.uint64("shesha.ts_earliest", "Earliest timestamp (ns)", base.DEC),
    ts_latest = ProtoField.uint64("shesha.ts_latest", "Latest timestamp (ns)", base.DEC),
    ts_spread = ProtoField.uint64("shesha.ts_spread", "Latest - earliest (ns)", base.DEC),
    packet_count = ProtoField.uint8("shesha.packet_count", "Packets summed (GRADIENT; 0 = unknown)", base.DEC),
    env_steps = ProtoField.uint24("shesha.env_steps", "Sender info (GRADIENT: worker env steps, low 24 bits)", base.DEC),
    error = ProtoField.string("shesha.error", "Decode error"),

    elements = ProtoField.bytes("shesha.elements", "Elements"),
    elem = ProtoField.float("shesha.elem", "Element"),

    credits = ProtoField.uint32("shesha.credit.credits", "Credits", base.DEC),
    acked_seq = ProtoField.uint32("shesha.credit.acked_seq", "Acked sequence", base.DEC),
    learner_version = ProtoField.uint32("shesha.credit.learner_version", "Learner version", base.DEC),
    ce_count = ProtoField.uint32("shesha.credit.ce_count", "CE-marked chunks", base.DEC),

    fb_port = ProtoField.uint16("shesha.feedback.port_id", "Port", base.DEC),
    fb_capacity = ProtoField.uint16("shesha.feedback.queue_capacity", "Queue capacity (packets)", base.DEC),
    fb_depth = ProtoField.uint16("shesha.feedback.queue_depth", "Queue depth (packets)", base.DEC),
    fb_mark = ProtoField.uint16("shesha.feedback.mark_permille", "Marked (permille)", base.DEC),
    fb_bytes = ProtoField.uint32("shesha.feedback.queue_bytes", "Queue bytes", base.DEC),
    fb_sojourn = ProtoField.uint32("shesha.feedback.sojourn_us", "Sojourn (us)", base.DEC),
    fb_merge = ProtoField.uint16("shesha.feedback.merge_permille", "Merged (permille)", base.DEC),
    fb_reserved = ProtoField.uint16("shesha.feedback.reserved", "Reserved", base.HEX),
    fb_drops = ProtoField.uint32("shesha.feedback.drops", "Tail drops", base.DEC),
}
local field_list = {}
for _, v in pairs(f) do field_list[#field_list + 1] = v end
shesha.fields = field_list

local ef_malformed = ProtoExpert.new("shesha.malformed", "Malformed Shesha message",
                                     expert.group.MALFORMED, expert.severity.ERROR)
local ef_merged = ProtoExpert.new("shesha.merged", "Merged in network",
                                  expert.group.SEQUENCE, expert.severity.NOTE)
shesha.experts = { ef_malformed, ef_merged }

shesha.prefs.port = Pref.uint("UDP port", DEFAULT_PORT, "UDP destination port of Shesha messages")
shesha.prefs.max_elements_shown = Pref.uint("Elements shown", 8, "How many payload elements to list")

-- bf16 (upper half of a binary32) to a Lua number, without bit operators (Lua 5.2/5.4 safe).
local function bf16_to_number(b)
    local sign = (b >= 0x8000) and -1 or 1
    local exp = math.floor(b / 128) % 256
    local mant = b % 128
    if exp == 255 then
        if mant == 0 then return sign * math.huge end
        return 0 / 0
    end
    if exp == 0 then return sign * mant * 2 ^ -133 end  -- subnormal: mant/128 * 2^-126
    return sign * (1 + mant / 128) * 2 ^ (exp - 127)
end

local function elem_size(et)
    if et == 1 then return 4 elseif et == 2 then return 2 end
    return 0
end

local function dissect_elements(tvb, tree, offset, count, et)
    local size = elem_size(et)
    local avail = tvb:len() - offset
    if avail <= 0 or size == 0 then return end
    local sub = tree:add(f.elements, tvb(offset, avail))
    sub:set_text(string.format("Elements (%d x %s, %d bytes)", count, elem_types[et], avail))
    local shown = math.min(count, shesha.prefs.max_elements_shown, math.floor(avail / size))
    for i = 0, shown - 1 do
        local r = tvb(offset + i * size, size)
        if et == 1 then
            sub:add_le(f.elem, r):prepend_text(string.format("[%d] ", i))
        else
            sub:add(f.elem, r, bf16_to_number(r:le_uint())):prepend_text(string.format("[%d] ", i))
        end
    end
end

local function dissect_credit(tvb, tree, o)
    local t = tree:add(shesha, tvb(o, CREDIT_BODY), "Credit")
    t:add(f.credits, tvb(o, 4))
    t:add(f.acked_seq, tvb(o + 4, 4))
    t:add(f.learner_version, tvb(o + 8, 4))
    t:add(f.ce_count, tvb(o + 12, 4))
    return string.format(" credits=%d acked=%d lv=%d ce=%d", tvb(o, 4):uint(), tvb(o + 4, 4):uint(),
                         tvb(o + 8, 4):uint(), tvb(o + 12, 4):uint())
end

local function dissect_credit_batch(tvb, tree, o, entries)
    local t = tree:add(shesha, tvb(o, entries * BATCH_ENTRY), string.format("Credit batch (%d entries)", entries))
    for i = 0, entries - 1 do
        local e = o + i * BATCH_ENTRY
        local sub = t:add(shesha, tvb(e, BATCH_ENTRY),
                          string.format("[%d] worker %d flags 0x%02x", i, tvb(e, 4):uint(), tvb(e + 4, 1):uint()))
        dissect_credit(tvb, sub, e + 8)
    end
    return string.format(" entries=%d", entries)
end

local function dissect_feedback(tvb, tree, o)
    local t = tree:add(shesha, tvb(o, FEEDBACK_BODY), "Feedback")
    t:add(f.fb_port, tvb(o, 2))
    t:add(f.fb_capacity, tvb(o + 2, 2))
    t:add(f.fb_depth, tvb(o + 4, 2))
    t:add(f.fb_mark, tvb(o + 6, 2))
    t:add(f.fb_bytes, tvb(o + 8, 4))
    t:add(f.fb_sojourn, tvb(o + 12, 4))
    t:add(f.fb_merge, tvb(o + 16, 2))
    t:add(f.fb_reserved, tvb(o + 18, 2))
    t:add(f.fb_drops, tvb(o + 20, 4))
    return string.format(" port=%d depth=%d/%d sojourn=%dus drops=%d", tvb(o, 2):uint(), tvb(o + 4, 2):uint(),
                         tvb(o + 2, 2):uint(), tvb(o + 12, 4):uint(), tvb(o + 20, 4):uint())
end

function shesha.dissector(tvb, pinfo, tree)
    local len = tvb:len()
    if len == 0 then return 0 end
    pinfo.cols.protocol = "Shesha"
    local root = tree:add(shesha, tvb(), "Shesha")

    local errors = {}  -- {name, text, treeitem-or-nil}, in proto::decode's order
    local function fail(item, name, text)
        errors[#errors + 1] = { name, text, item }
    end

    if len < HEADER_SIZE then
        local e = root:add(f.error, "ShortPacket")
        e:add_proto_expert_info(ef_malformed, string.format("short packet: %d bytes, header needs %d", len, HEADER_SIZE))
        pinfo.cols.info = string.format("Shesha malformed: short packet (%d bytes)", len)
        return len
    end

    local magic = tvb(0, 2):uint()
    local version = tvb(2, 1):uint()
    local mtype = tvb(3, 1):uint()
    local flags = tvb(4, 1):uint()
    local et = tvb(5, 1):uint()
    local chunk_index = tvb(20, 2):uint()
    local chunk_count = tvb(22, 2):uint()
    local elem_count = tvb(24, 2):uint()
    local contrib = tvb(26, 2):uint()
    local ts_e = tvb(28, 8):uint64()
    local ts_l = tvb(36, 8):uint64()

    local hdr = root:add(shesha, tvb(0, HEADER_SIZE), "Header")
    local i_magic = hdr:add(f.magic, tvb(0, 2))
    local i_version = hdr:add(f.version, tvb(2, 1))
    local i_type = hdr:add(f.type, tvb(3, 1))
    local i_flags = hdr:add(f.flags, tvb(4, 1))
    i_flags:add(f.flag_merged, tvb(4, 1))
    i_flags:add(f.flag_ce, tvb(4, 1))
    i_flags:add(f.flag_echo, tvb(4, 1))
    i_flags:add(f.flag_sender_merged, tvb(4, 1))
    i_flags:add(f.flag_unknown, tvb(4, 1))
    local i_et = hdr:add(f.elem_type, tvb(5, 1))
    hdr:add(f.cluster, tvb(6, 2))
    local i_worker = hdr:add(f.worker, tvb(8, 4))
    local every_member = tvb(8, 4):uint() == 0xFFFFFFFF
    if every_member then i_worker:append_text(" (every member: a MODEL for the switch to replicate)") end
    hdr:add(f.model_version, tvb(12, 4))
    hdr:add(f.seq, tvb(16, 4))
    local i_chunk_index = hdr:add(f.chunk_index, tvb(20, 2))
    hdr:add(f.chunk_count, tvb(22, 2))
    local i_elem_count = hdr:add(f.elem_count, tvb(24, 2))
    local i_contrib = hdr:add(f.contrib_count, tvb(26, 2))
    local i_ts_e = hdr:add(f.ts_earliest, tvb(28, 8))
    hdr:add(f.ts_latest, tvb(36, 8))
    if ts_l >= ts_e then hdr:add(f.ts_spread, ts_l - ts_e):set_generated() end
    hdr:add(f.packet_count, tvb(44, 1))
    hdr:add(f.env_steps, tvb(45, 3))

    local carries_elements = (mtype == 1 or mtype == 2)
    local body_len = len - HEADER_SIZE

    -- Same checks, same order as proto::decode.
    if magic ~= MAGIC then fail(i_magic, "BadMagic", string.format("bad magic 0x%04x", magic)) end
    if version ~= VERSION then fail(i_version, "BadVersion", "unsupported version " .. version) end
    if msg_types[mtype] == nil then fail(i_type, "UnknownType", "unknown type " .. mtype) end
    if flags >= 0x10 then fail(i_flags, "UnknownFlags", string.format("unknown flag bits 0x%02x", flags - flags % 16)) end
    if carries_elements then
        if et ~= 1 and et ~= 2 then fail(i_et, "BadElemType", "element type " .. et .. " not allowed for " .. msg_types[mtype]) end
    elseif msg_types[mtype] ~= nil and et ~= 0 then
        fail(i_et, "BadElemType", "element type " .. et .. " not allowed for " .. msg_types[mtype])
    end
    if chunk_count == 0 or chunk_index >= chunk_count then
        fail(i_chunk_index, "BadChunk", string.format("chunk %d of %d", chunk_index, chunk_count))
    end
    if elem_count > MAX_ELEMENTS then fail(i_elem_count, "TooManyElements", "more than " .. MAX_ELEMENTS .. " elements") end
    if (mtype == 3 or mtype == 4) and elem_count ~= 0 then
        fail(i_elem_count, "LengthMismatch", msg_types[mtype] .. " carries no elements")
    elseif mtype == 5 and (elem_count == 0 or elem_count > MAX_BATCH_ENTRIES) then
        fail(i_elem_count, "LengthMismatch", "CREDIT_BATCH carries 1.." .. MAX_BATCH_ENTRIES .. " entries")
    end
    if contrib == 0 then
        fail(i_contrib, "BadContribCount", "contribution count 0")
    elseif contrib > 1 and (flags % 2 == 0) and (math.floor(flags / 8) % 2 == 0) then
        fail(i_contrib, "BadContribCount", contrib .. " contributions without a merged flag")
    end
    if ts_e > ts_l then fail(i_ts_e, "BadTimestamps", "earliest timestamp after latest") end
    if carries_elements then
        local need = elem_count * elem_size(et)
        if elem_size(et) ~= 0 and body_len ~= need then
            fail(root, "LengthMismatch", string.format("%d body bytes, %d elements need %d", body_len, elem_count, need))
        end
    elseif mtype == 3 or mtype == 4 or mtype == 5 then
        local need = (mtype == 3) and CREDIT_BODY or ((mtype == 4) and FEEDBACK_BODY or elem_count * BATCH_ENTRY)
        if body_len < need then
            fail(root, "ShortPacket", string.format("%s body is %d bytes, needs %d", msg_types[mtype], body_len, need))
        elseif body_len > need then
            fail(root, "LengthMismatch", string.format("%s body is %d bytes, not %d", msg_types[mtype], body_len, need))
        end
    end

    local info = string.format("%s cluster=%d worker=%s v=%d seq=%d", msg_types[mtype] or ("type " .. mtype),
                               tvb(6, 2):uint(), every_member and "every" or tostring(tvb(8, 4):uint()),
                               tvb(12, 4):uint(), tvb(16, 4):uint())
    if carries_elements then
        info = info .. string.format(" chunk=%d/%d elems=%d contrib=%d", chunk_index, chunk_count, elem_count, contrib)
        dissect_elements(tvb, root, HEADER_SIZE, elem_count, et)
    elseif mtype == 3 and body_len >= CREDIT_BODY then
        info = info .. dissect_credit(tvb, root, HEADER_SIZE)
    elseif mtype == 4 and body_len >= FEEDBACK_BODY then
        info = info .. dissect_feedback(tvb, root, HEADER_SIZE)
    elseif mtype == 5 and #errors == 0 then
        info = info .. dissect_credit_batch(tvb, root, HEADER_SIZE, elem_count)
    end
    local names = {}
    if flags % 2 == 1 then names[#names + 1] = "MERGED" end
    if math.floor(flags / 2) % 2 == 1 then names[#names + 1] = "CE" end
    if math.floor(flags / 4) % 2 == 1 then names[#names + 1] = "ECHO" end
    if math.floor(flags / 8) % 2 == 1 then names[#names + 1] = "SENDER_MERGED" end
    if #names > 0 then info = info .. " [" .. table.concat(names, ",") .. "]" end
    if flags % 2 == 1 and #errors == 0 then
        i_flags:add_proto_expert_info(ef_merged, contrib .. " contributions merged in network")
    end

    if #errors > 0 then
        root:add(f.error, errors[1][1]):set_generated()
        for _, e in ipairs(errors) do e[3]:add_proto_expert_info(ef_malformed, e[2]) end
        info = "Malformed (" .. errors[1][1] .. ") " .. info
    end
    pinfo.cols.info = info
    return len
end

-- Port registration, following the preference.
local udp_port_table = DissectorTable.get("udp.port")
local registered_port = DEFAULT_PORT
udp_port_table:add(registered_port, shesha)

function shesha.prefs_changed()
    if registered_port ~= shesha.prefs.port then
        if registered_port ~= 0 then udp_port_table:remove(registered_port, shesha) end
        registered_port = shesha.prefs.port
        if registered_port ~= 0 then udp_port_table:add(registered_port, shesha) end
    end
end
