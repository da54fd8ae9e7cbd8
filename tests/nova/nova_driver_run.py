"""Drive Nova's own ironic virt driver against ironflow, as nova-compute would.

Run by tests/nova_driver_test.go with Debian's /usr/bin/python3, which has
python3-nova. It imports the unmodified nova.virt.ironic.driver.IronicDriver,
configures it as a nova-compute service talking to Ironic would be configured
([ironic] auth_type=none, endpoint_override=<ironflow API>), and runs the calls
nova-compute makes, in the order it makes them, on in-memory Nova objects.

Every step prints one JSON line on stdout:
    {"step": NAME, "status": "PASS"|"FAIL", "detail": ..., ...}
With --sync the script then waits for one line on stdin before the next
step, so that the Go test can check ironflow's side (node states, VIFs,
instance_info, the stored config drive) between steps.

What is replaced, exactly, and why (everything else is Nova's own code):

  Nova's database (there is none here: nova-compute would read and write
  its cell database through these calls):
    * objects.ServiceList.get_all_computes_by_hv_type -> an empty list: the
      driver's hash ring then holds this compute host alone, which is what
      a single nova-compute service sees.
    * objects.InstanceList.get_uuids_by_host -> the UUIDs of this script's
      instances (nova-compute's instances on this host).
    * objects.Instance.get_by_uuid -> this script's instance of that UUID
      (list_instances maps node instance_uuids to instance names with it).
    * objects.Instance.save -> keeps the change in memory, checking
      expected_task_state as the database update would.
    * objects.Instance.refresh -> nothing: the in-memory object is the
      instance's only copy.
    * objects.Instance.get_bdms -> no block device mappings (no volumes:
      the metadata builder asks for them).
    * instance.ec2_ids is set on each instance instead of being loaded from
      the EC2 id mapping tables.
  Neutron:
    * nova.network.security_group_api.get_instance_security_groups -> the
      "default" group (the config drive's metadata lists the groups).
    * network_info is a nova.network.model.NetworkInfo built here with
      Nova's fake_network_cache_model helpers: one VIF per node whose
      address is the node's port MAC, as Neutron would have bound it.
  Glance: nothing is replaced; the image is an objects.ImageMeta built from
    a dict, as nova-compute passes it (Nova's driver sends its UUID as
    instance_info/image_source; ironflow's fake deploy does not fetch it).
  Metadata service: nothing is replaced; the config drive is built by Nova's
    own InstanceMetadata and ConfigDriveBuilder (genisoimage).
  virtapi: nova.virt.fake.FakeVirtAPI, the virtapi of Nova's own fake
    driver (the ironic driver does not call it).
  Operator actions (putting a node in maintenance, taking it out) are plain
    HTTP requests to ironflow, marked "operator" below: they are not Nova's.
"""

import argparse
import json
import sys
import traceback
import urllib.request
import uuid as uuidlib


def emit(obj):
    sys.stdout.write(json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()


def http_request_of(e):
    """Names the request a client error answered (ironicclient keeps it;
    Nova wraps some errors, keeping the original as __context__)."""
    while e is not None:
        method, url = getattr(e, "method", None), getattr(e, "url", None)
        if url:
            return " [%s %s]" % (method or "", url)
        e = e.__cause__ or e.__context__
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--api-url", required=True)
    ap.add_argument("--node", required=True, help="node for the instances' life")
    ap.add_argument("--node-mac", required=True)
    ap.add_argument("--node-mac2", required=True, help="second port of --node")
    ap.add_argument("--maint-node", required=True)
    ap.add_argument("--maint-mac", required=True)
    ap.add_argument("--trait-node", required=True)
    ap.add_argument("--trait-mac", required=True)
    ap.add_argument("--node-trait", required=True, help="trait --node has and --trait-node lacks")
    ap.add_argument("--resource-class", required=True)
    ap.add_argument("--connector-iqn", required=True)
    ap.add_argument("--connector-ip", required=True)
    ap.add_argument("--rescue-password", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--sync", action="store_true")
    args = ap.parse_args()

    try:
        from nova.virt.ironic import driver as ironic_driver  # noqa: F401
    except Exception as e:  # the Go test checks this first, and skips
        emit({"step": "import", "status": "FAIL", "detail": "cannot import nova: %s" % e})
        return 3
    try:
        Run(args).run()
    except Exception as e:
        emit({"step": "harness", "status": "FAIL", "detail": "%s: %s" % (type(e).__name__, e),
              "traceback": traceback.format_exc()[-3000:]})
        return 1
    return 0


class Run:
    def __init__(self, args):
        self.args = args
        self.failed = False
        self.instances = {}
        self.saved_task_state = {}

    # --- harness -----------------------------------------------------

    def step(self, name, fn, **extra):
        """Runs fn; PASS unless it raises. fn returns a detail dict."""
        rec = {"step": name}
        rec.update(extra)
        try:
            detail = fn()
            rec["status"] = "PASS"
            rec["detail"] = detail
        except Exception as e:
            self.failed = True
            rec["status"] = "FAIL"
            rec["detail"] = "%s: %s%s" % (type(e).__name__, e, http_request_of(e))
            rec["traceback"] = traceback.format_exc()[-3000:]
        emit(rec)
        if self.args.sync:
            sys.stdin.readline()
        return rec["status"] == "PASS"

    def http(self, method, path, body=None):
        """An operator's request to ironflow (not Nova's)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.args.api_url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        req.add_header("X-OpenStack-Ironic-API-Version", "1.46")
        with urllib.request.urlopen(req) as resp:
            b = resp.read()
            return json.loads(b) if b else None

    # --- Nova set-up ---------------------------------------------------

    def configure(self):
        import nova.conf
        from nova import config as nova_config

        conf_path = self.args.workdir + "/nova.conf"
        with open(conf_path, "w") as f:
            f.write(
                "[DEFAULT]\n"
                "host = nova-ironflow-test\n"
                "compute_driver = ironic.IronicDriver\n"
                "state_path = %(w)s\n"
                "instances_path = %(w)s/instances\n"
                "force_config_drive = false\n"
                "config_drive_format = iso9660\n"
                "mkisofs_cmd = genisoimage\n"
                "[oslo_concurrency]\n"
                "lock_path = %(w)s/locks\n"
                "[ironic]\n"
                "auth_type = none\n"
                "endpoint_override = %(u)s\n"
                "api_retry_interval = 1\n"
                "api_max_retries = 120\n" % {"w": self.args.workdir, "u": self.args.api_url}
            )
        nova_config.parse_args([], default_config_files=[conf_path], configure_db=False, init_rpc=False)
        self.CONF = nova.conf.CONF
        return conf_path

    def replace_internals(self):
        from nova import exception
        from nova import objects
        from nova.network import security_group_api

        objects.register_all()
        instances = self.instances

        def get_all_computes_by_hv_type(ctxt, hv_type):
            return objects.ServiceList(objects=[])

        def get_uuids_by_host(ctxt, host):
            return [u for u, i in instances.items() if i.host == host]

        def get_by_uuid(ctxt, uuid, expected_attrs=None, use_slave=False):
            if uuid not in instances:
                raise exception.InstanceNotFound(instance_id=uuid)
            return instances[uuid]

        saved = self.saved_task_state

        def save(inst, expected_vm_state=None, expected_task_state=None, admin_state_reset=False):
            # The database compares expected_task_state with the stored
            # row, not with the object's new value.
            if expected_task_state is not None:
                want = expected_task_state if isinstance(expected_task_state, (list, tuple)) else [expected_task_state]
                if saved.get(inst.uuid) not in want:
                    raise exception.UnexpectedTaskStateError(
                        instance_uuid=inst.uuid, expected=want, actual=saved.get(inst.uuid))
            saved[inst.uuid] = inst.task_state
            inst.obj_reset_changes()

        def refresh(inst, use_slave=False):
            pass

        def get_bdms(inst):
            return objects.BlockDeviceMappingList(objects=[])

        def get_instance_security_groups(context, instance, detailed=False):
            return [{"name": "default"}]

        objects.ServiceList.get_all_computes_by_hv_type = staticmethod(get_all_computes_by_hv_type)
        objects.InstanceList.get_uuids_by_host = staticmethod(get_uuids_by_host)
        objects.Instance.get_by_uuid = staticmethod(get_by_uuid)
        objects.Instance.save = save
        objects.Instance.refresh = refresh
        objects.Instance.get_bdms = get_bdms
        security_group_api.get_instance_security_groups = get_instance_security_groups

    def make_instance(self, name, node, flavor, config_drive=False):
        from nova import objects
        from nova.tests.unit import fake_instance

        inst = fake_instance.fake_instance_obj(
            self.ctx,
            uuid=str(uuidlib.uuid4()),
            node=node,
            host=self.CONF.host,
            flavor=flavor,
            display_name=name,
            hostname=name,
            project_id="nova-project",
            user_id="nova-user",
            config_drive="True" if config_drive else "",
            vm_state="building",
            task_state="spawning",
            launch_index=0,
            reservation_id="r-" + name,
            root_device_name=None,
            user_data=None,
            key_name=None,
            expected_attrs=["system_metadata", "metadata"],
        )
        inst.ec2_ids = objects.EC2Ids(instance_id="i-%08x" % (len(self.instances) + 1),
                                      ami_id="ami-00000001", kernel_id=None, ramdisk_id=None)
        inst.device_metadata = None
        inst.numa_topology = None
        inst.obj_reset_changes()
        self.instances[inst.uuid] = inst
        self.saved_task_state[inst.uuid] = inst.task_state
        return inst

    def transition(self, inst, vm_state, task_state):
        """What the compute manager does (and saves) around a driver call."""
        inst.vm_state, inst.task_state = vm_state, task_state
        inst.save()

    def network_info(self, inst, mac, ip):
        from nova import objects
        from nova.network import model
        from nova.tests.unit import fake_network_cache_model as fnm

        subnet = fnm.new_subnet({"cidr": "192.0.2.0/24", "gateway": fnm.new_ip({"address": "192.0.2.1"}),
                                 "ips": [fnm.new_fixed_ip({"address": ip})], "routes": []})
        net = fnm.new_network({"id": "a1b2c3d4-0000-4000-8000-000000000001", "label": "provision", "subnets": [subnet]})
        vif = fnm.new_vif({"id": str(uuidlib.uuid4()), "address": mac, "network": net, "type": "other"})
        nw = model.NetworkInfo([vif])
        inst.info_cache = objects.InstanceInfoCache(network_info=nw, instance_uuid=inst.uuid)
        return nw

    # --- the sequence ---------------------------------------------------

    def run(self):
        a = self.args
        conf_path = self.configure()
        self.replace_internals()

        from nova.compute import power_state, provider_tree, task_states, vm_states
        from nova import context as nova_context
        from nova import exception
        from nova import objects
        from nova.virt import fake as fake_virt
        from nova.virt.ironic import driver as ironic_driver
        from nova.tests.unit import fake_network_cache_model as fnm
        import ironicclient.common.apiclient.exceptions as ic_exc

        objects.register_all()
        self.ctx = nova_context.get_admin_context()
        drv = ironic_driver.IronicDriver(fake_virt.FakeVirtAPI())
        self.drv = drv
        emit({"step": "configure", "status": "PASS", "detail": {"conf": open(conf_path).read()}})
        if a.sync:
            sys.stdin.readline()

        def flavor(extra_specs=None):
            return objects.Flavor(id=1, name="bm.small", flavorid="bm.small", memory_mb=2048, vcpus=2,
                                  root_gb=10, ephemeral_gb=0, swap=0, rxtx_factor=1.0, vcpu_weight=0,
                                  disabled=False, is_public=True, projects=[],
                                  extra_specs=extra_specs or {"resources:CUSTOM_" + a.resource_class.upper(): "1"})

        image = objects.ImageMeta.from_dict({
            "id": "6a1b3c2d-0f0e-4d4c-9b8a-7a6b5c4d3e2f", "name": "nova-test-image",
            "disk_format": "raw", "container_format": "bare", "properties": {}})

        def init_host():
            drv.init_host(self.CONF.host)
            return {"hash_ring": sorted(drv.hash_ring.nodes)}
        self.step("init_host", init_host)

        def get_available_nodes():
            nodes = drv.get_available_nodes()
            for n in (a.node, a.maint_node, a.trait_node):
                if n not in nodes:
                    raise AssertionError("node %s not offered; got %d nodes" % (n, len(nodes)))
            return {"count": len(nodes)}
        self.step("get_available_nodes", get_available_nodes)

        def update_provider_tree():
            tree = provider_tree.ProviderTree()
            tree.new_root(a.node, a.node)
            drv.update_provider_tree(tree, a.node)
            data = tree.data(a.node)
            rc = "CUSTOM_" + a.resource_class.upper().replace("-", "_")
            inv = data.inventory.get(rc)
            if not inv or inv["total"] != 1 or inv["reserved"] != 0:
                raise AssertionError("inventory %s" % data.inventory)
            if a.node_trait not in data.traits:
                raise AssertionError("traits %s lack %s" % (sorted(data.traits), a.node_trait))
            return {"inventory": data.inventory, "traits": sorted(data.traits)}
        self.step("update_provider_tree", update_provider_tree)

        # ---- instance 1: no config drive, every day-2 operation ----
        i1 = self.make_instance("nova-inst-1", a.node, flavor({"trait:" + a.node_trait: "required"}))
        nw1 = self.network_info(i1, a.node_mac, "192.0.2.10")
        ex = {"instance": i1.uuid, "node": a.node, "vif": nw1[0]["id"]}

        self.step("prepare_for_spawn", lambda: drv.prepare_for_spawn(i1), **ex)
        self.step("prepare_networks_before_block_device_mapping",
                  lambda: drv.prepare_networks_before_block_device_mapping(i1, nw1), **ex)

        def spawn():
            drv.spawn(self.ctx, i1, image, [], None, {}, network_info=nw1)
            return {"config_drive": False}
        self.step("spawn", spawn, **ex)
        self.transition(i1, vm_states.ACTIVE, None)

        def get_info():
            st = drv.get_info(i1, use_cache=False).state
            if st != power_state.RUNNING:
                raise AssertionError("state %s, want RUNNING (%s)" % (st, power_state.RUNNING))
            return {"state": st}
        self.step("get_info", get_info, **ex)

        def list_instances():
            names = drv.list_instances()
            uuids = drv.list_instance_uuids()
            if i1.name not in names or i1.uuid not in uuids:
                raise AssertionError("list_instances %s / uuids %s lack %s" % (names, uuids, i1.uuid))
            return {"names": names}
        self.step("list_instances", list_instances, **ex)

        def power(fn, want):
            def run():
                fn()
                st = drv.get_info(i1, use_cache=False).state
                if st != want:
                    raise AssertionError("state after: %s, want %s" % (st, want))
                return {"state": st}
            return run
        self.step("reboot_soft", power(lambda: drv.reboot(self.ctx, i1, nw1, "SOFT"), power_state.RUNNING), **ex)
        self.step("reboot_hard", power(lambda: drv.reboot(self.ctx, i1, nw1, "HARD"), power_state.RUNNING), **ex)
        self.step("power_off_soft", power(lambda: drv.power_off(i1, timeout=30), power_state.SHUTDOWN), **ex)
        self.step("power_on", power(lambda: drv.power_on(self.ctx, i1, nw1), power_state.RUNNING), **ex)
        self.step("power_off_hard", power(lambda: drv.power_off(i1), power_state.SHUTDOWN), **ex)
        self.step("power_on_again", power(lambda: drv.power_on(self.ctx, i1, nw1), power_state.RUNNING), **ex)

        vif2 = fnm.new_vif({"id": str(uuidlib.uuid4()), "address": a.node_mac2, "network": nw1[0]["network"], "type": "other"})
        ex2 = dict(ex, vif2=vif2["id"])
        self.step("attach_interface", lambda: drv.attach_interface(self.ctx, i1, image, vif2), **ex2)
        self.step("detach_interface", lambda: drv.detach_interface(self.ctx, i1, vif2), **ex2)

        def get_volume_connector():
            props = drv.get_volume_connector(i1)
            want = {"ip": a.connector_ip, "host": a.connector_ip, "initiator": a.connector_iqn,
                    "platform": "x86_64", "os_type": "baremetal", "multipath": False}
            if props != want:
                raise AssertionError("connector %s, want %s" % (props, want))
            return props
        self.step("get_volume_connector", get_volume_connector, **ex)

        def rescue():
            drv.rescue(self.ctx, i1, nw1, image, a.rescue_password, None)
            return {}
        self.step("rescue", rescue, **ex)
        self.step("unrescue", lambda: drv.unrescue(self.ctx, i1), **ex)

        def rebuild():
            self.transition(i1, vm_states.ACTIVE, task_states.REBUILDING)
            drv.rebuild(self.ctx, i1, image, [], None, {}, [], None, None, network_info=nw1)
            self.transition(i1, vm_states.ACTIVE, None)
            return {}
        self.step("rebuild", rebuild, **ex)

        def destroy(inst, nw):
            def run():
                self.transition(inst, inst.vm_state, task_states.DELETING)
                drv.destroy(self.ctx, inst, nw)
                if drv.instance_exists(inst):
                    raise AssertionError("instance still on a node after destroy")
                self.transition(inst, vm_states.DELETED, None)
                return {}
            return run
        # destroy runs even when spawn failed: it also cleans the node up.
        self.step("destroy", destroy(i1, nw1), **ex)

        # ---- instance 2: with a config drive, and its rebuild ----
        i2 = self.make_instance("nova-inst-2", a.node, flavor(), config_drive=True)
        nw2 = self.network_info(i2, a.node_mac, "192.0.2.11")
        ex = {"instance": i2.uuid, "node": a.node, "vif": nw2[0]["id"]}
        self.step("configdrive.prepare_for_spawn", lambda: drv.prepare_for_spawn(i2), **ex)
        self.step("configdrive.prepare_networks_before_block_device_mapping",
                  lambda: drv.prepare_networks_before_block_device_mapping(i2, nw2), **ex)

        def spawn_cd():
            drv.spawn(self.ctx, i2, image, [("/etc/nova-test", b"from nova")], "admin-pw", {}, network_info=nw2)
            return {"config_drive": True}
        self.step("spawn_configdrive", spawn_cd, **ex)
        self.transition(i2, vm_states.ACTIVE, None)

        def rebuild_cd():
            self.transition(i2, vm_states.ACTIVE, task_states.REBUILDING)
            drv.rebuild(self.ctx, i2, image, [], "admin-pw-2", {}, [], None, None, network_info=nw2)
            self.transition(i2, vm_states.ACTIVE, None)
            return {}
        self.step("rebuild_configdrive", rebuild_cd, **ex)
        self.step("configdrive.destroy", destroy(i2, nw2), **ex)

        # ---- failure: spawn onto a node put in maintenance ----
        i3 = self.make_instance("nova-inst-3", a.maint_node, flavor())
        nw3 = self.network_info(i3, a.maint_mac, "192.0.2.12")
        ex = {"instance": i3.uuid, "node": a.maint_node}
        self.step("maintenance.prepare_for_spawn", lambda: drv.prepare_for_spawn(i3), **ex)

        def set_maint(on):
            def run():
                if on:
                    self.http("PUT", "/v1/nodes/%s/maintenance" % a.maint_node, {"reason": "operator: disk swap"})
                else:
                    self.http("DELETE", "/v1/nodes/%s/maintenance" % a.maint_node)
                return {"maintenance": on}
            return run
        self.step("operator.set_maintenance", set_maint(True), **ex)

        def spawn_maint():
            try:
                drv.spawn(self.ctx, i3, image, [], None, {}, network_info=nw3)
            except ic_exc.BadRequest as e:
                # Against Ironic: the deploy request gets 400 NodeInMaintenance,
                # which spawn re-raises after cleaning the node up.
                if "because it's in maintenance mode" not in str(e) or "(HTTP 400)" not in str(e):
                    raise AssertionError("BadRequest is not Ironic's NodeInMaintenance: %s" % e)
                return {"raised": type(e).__name__, "message": str(e)}
            raise AssertionError("spawn onto a node in maintenance did not fail")
        self.step("maintenance.spawn_fails", spawn_maint, **ex)
        self.step("operator.unset_maintenance", set_maint(False), **ex)

        # ---- failure: a required trait the node lacks ----
        i4 = self.make_instance("nova-inst-4", a.trait_node, flavor({"trait:" + a.node_trait: "required"}))
        nw4 = self.network_info(i4, a.trait_mac, "192.0.2.13")
        ex = {"instance": i4.uuid, "node": a.trait_node}
        self.step("traits.prepare_for_spawn", lambda: drv.prepare_for_spawn(i4), **ex)

        def spawn_traits():
            try:
                drv.spawn(self.ctx, i4, image, [], None, {}, network_info=nw4)
            except exception.ValidationError as e:
                want = ("Cannot specify instance traits that are not also set on the node. "
                        "Node %s is missing traits %s" % (a.trait_node, a.node_trait))
                if want not in str(e) or "'result': False" not in str(e):
                    raise AssertionError("ValidationError does not give Ironic's reason %r: %s" % (want, e))
                return {"raised": type(e).__name__, "message": str(e)}
            raise AssertionError("spawn with a trait the node lacks did not fail")
        self.step("traits.spawn_fails_validation", spawn_traits, **ex)

        emit({"step": "done", "status": "FAIL" if self.failed else "PASS", "detail": {}})


if __name__ == "__main__":
    sys.exit(main())
