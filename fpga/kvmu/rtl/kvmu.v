// KVMU reference RTL: the KV-cache management unit of the FPGA draft (docs/kvmu.md), synthesizable Verilog-2005.
//
// Three pointer registers (valid <= curr <= ahead <= capacity), four modes, the input-mux select and the KV write
// port, cycle for cycle as the model (fpga/kvmu.py, fpga/kvmu_kernel.py) at the default cycle costs: one cycle per
// command and per token. Checked against the model by `hwmodel kvmu verify --rtl fpga/rtl/kvmu.v --top kvmu`.
//
// Signal contract (docs/kvmu.md, "RTL signal contract"):
//   * every output is a register (or, for mux_sel, decoded from one) updated on the rising edge of clk; its value
//     between two edges is the model's sample for the cycle that the earlier edge ends;
//   * rst is synchronous and active high: it gives the state after `init 0` (mode init, mux PCIe, status OK);
//   * a command (cmd_valid, cmd_op, cmd_arg) is taken on an edge where cmd_valid && cmd_ready. That edge is the
//     command's first cycle: mode, mux and status switch there; single-cycle commands also update the registers
//     there; speculate n / ingest n write one token per edge (kv_wr_en, kv_wr_addr = ahead before the token);
//   * cmd_ready is low while a speculate, ingest or wait command has token / idle cycles left;
//   * an edge without a command (cmd_valid low) is an idle cycle: status OK, no KV write, nothing else changes;
//   * cfg_capacity is held stable while rst is low.
module kvmu #(
    parameter PTR_W = 32,   // pointer and capacity width (capacity <= 2**(PTR_W-1) - 1)
    parameter ARG_W = 32    // command argument width, two's complement
) (
    input  wire                    clk,
    input  wire                    rst,
    input  wire [PTR_W-1:0]        cfg_capacity,
    input  wire                    cmd_valid,
    input  wire [2:0]              cmd_op,
    input  wire signed [ARG_W-1:0] cmd_arg,
    output wire                    cmd_ready,
    output reg  [PTR_W-1:0]        valid_ptr,
    output reg  [PTR_W-1:0]        curr_ptr,
    output reg  [PTR_W-1:0]        ahead_ptr,
    output reg  [1:0]              mode,
    output wire                    mux_sel,
    output reg                     kv_wr_en,
    output reg  [PTR_W-1:0]        kv_wr_addr,
    output reg  [3:0]              status
);
    // Opcodes (fpga/kvmu_codes.py Op)
    localparam [2:0] OP_INIT = 3'd0, OP_SPECULATE = 3'd1, OP_ACCEPT = 3'd2, OP_ROLLBACK = 3'd3,
                     OP_INGEST = 3'd4, OP_MARK = 3'd5, OP_WAIT = 3'd6;
    // Modes (Mode)
    localparam [1:0] M_INIT = 2'd0, M_SPECULATE = 2'd1, M_ACCEPT = 2'd2, M_ROLLBACK = 2'd3;
    // Status codes (Status)
    localparam [3:0] ST_OK = 4'd0, ST_BAD_COUNT = 4'd1, ST_OVER_CAPACITY = 4'd2, ST_INIT_OUT_OF_RANGE = 4'd3,
                     ST_NOTHING_TO_VERIFY = 4'd4, ST_MUX_NOT_PCIE = 4'd5, ST_STEP_PENDING = 4'd6,
                     ST_EMPTY_STEP = 4'd7, ST_UNKNOWN_OPCODE = 4'd8;
    // What a multi-cycle command does in its remaining cycles
    localparam [1:0] B_SPECULATE = 2'd0, B_INGEST = 2'd1, B_WAIT = 2'd2;

    reg [ARG_W-1:0] left;       // cycles the current command still occupies after this one
    reg [1:0]       busy_op;

    assign cmd_ready = (left == {ARG_W{1'b0}});
    assign mux_sel = (mode == M_INIT) || (mode == M_ROLLBACK);   // 1 = PCIe, 0 = local sampler

    // Decode of the command on the bus against the current state
    wire             arg_neg  = cmd_arg[ARG_W-1];
    wire             count_ok = !arg_neg && (cmd_arg != {ARG_W{1'b0}});               // n >= 1
    wire [PTR_W:0]   room     = {1'b0, cfg_capacity} - {1'b0, ahead_ptr};            // capacity - ahead >= 0
    wire             fits     = !arg_neg && ({{(PTR_W + 1 > ARG_W ? PTR_W + 1 - ARG_W : 0){1'b0}}, cmd_arg}
                                             <= room);                               // ahead + n <= capacity
    wire             init_ok  = !arg_neg && ({{(PTR_W + 1 > ARG_W ? PTR_W + 1 - ARG_W : 0){1'b0}}, cmd_arg}
                                             <= {1'b0, cfg_capacity});               // 0 <= p <= capacity
    wire             pending  = (curr_ptr != valid_ptr);
    wire             pcie     = mux_sel;

    always @(posedge clk) begin
        if (rst) begin
            valid_ptr <= {PTR_W{1'b0}};
            curr_ptr <= {PTR_W{1'b0}};
            ahead_ptr <= {PTR_W{1'b0}};
            mode <= M_INIT;
            status <= ST_OK;
            kv_wr_en <= 1'b0;
            kv_wr_addr <= {PTR_W{1'b0}};
            left <= {ARG_W{1'b0}};
            busy_op <= B_WAIT;
        end else if (!cmd_ready) begin
            // the remaining token / idle cycles of speculate, ingest or wait
            left <= left - 1'b1;
            kv_wr_en <= (busy_op != B_WAIT);
            if (busy_op != B_WAIT) begin
                kv_wr_addr <= ahead_ptr;
                ahead_ptr <= ahead_ptr + 1'b1;
            end
            if (busy_op == B_INGEST) begin
                valid_ptr <= valid_ptr + 1'b1;
                curr_ptr <= curr_ptr + 1'b1;
            end
        end else if (cmd_valid) begin
            kv_wr_en <= 1'b0;
            status <= ST_OK;
            case (cmd_op)
                OP_INIT:
                    if (!init_ok) status <= ST_INIT_OUT_OF_RANGE;
                    else begin
                        valid_ptr <= cmd_arg[PTR_W-1:0];
                        curr_ptr <= cmd_arg[PTR_W-1:0];
                        ahead_ptr <= cmd_arg[PTR_W-1:0];
                        mode <= M_INIT;
                    end
                OP_SPECULATE:
                    if (!count_ok) status <= ST_BAD_COUNT;
                    else if (!fits) status <= ST_OVER_CAPACITY;
                    else begin
                        mode <= M_SPECULATE;
                        kv_wr_en <= 1'b1;
                        kv_wr_addr <= ahead_ptr;
                        ahead_ptr <= ahead_ptr + 1'b1;
                        left <= cmd_arg - 1'b1;
                        busy_op <= B_SPECULATE;
                    end
                OP_ACCEPT:
                    if (!pending) status <= ST_NOTHING_TO_VERIFY;
                    else begin
                        valid_ptr <= curr_ptr;
                        curr_ptr <= ahead_ptr;
                        mode <= M_ACCEPT;
                    end
                OP_ROLLBACK:
                    if (!pending) status <= ST_NOTHING_TO_VERIFY;
                    else begin
                        curr_ptr <= valid_ptr;
                        ahead_ptr <= valid_ptr;
                        mode <= M_ROLLBACK;
                    end
                OP_INGEST:
                    if (!count_ok) status <= ST_BAD_COUNT;
                    else if (!pcie) status <= ST_MUX_NOT_PCIE;
                    else if (!fits) status <= ST_OVER_CAPACITY;
                    else begin
                        kv_wr_en <= 1'b1;
                        kv_wr_addr <= ahead_ptr;
                        valid_ptr <= valid_ptr + 1'b1;
                        curr_ptr <= curr_ptr + 1'b1;
                        ahead_ptr <= ahead_ptr + 1'b1;
                        left <= cmd_arg - 1'b1;
                        busy_op <= B_INGEST;
                    end
                OP_MARK:
                    if (pending) status <= ST_STEP_PENDING;
                    else if (ahead_ptr == curr_ptr) status <= ST_EMPTY_STEP;
                    else begin
                        curr_ptr <= ahead_ptr;
                        mode <= M_SPECULATE;
                    end
                OP_WAIT:
                    if (!count_ok) status <= ST_BAD_COUNT;
                    else begin
                        left <= cmd_arg - 1'b1;
                        busy_op <= B_WAIT;
                    end
                default:
                    status <= ST_UNKNOWN_OPCODE;
            endcase
        end else begin
            // idle bus
            kv_wr_en <= 1'b0;
            status <= ST_OK;
        end
    end
endmodule
