# What `make deb` packages (CPack's DEB generator): accelmon_<version>_<arch>.deb with the
# binary, the systemd units and sysusers.d file, the default config and env files (conffiles),
# the dashboards and Prometheus rules, the docs and the man page. Relative destinations are
# under /usr in the package (CPACK_PACKAGING_INSTALL_PREFIX); /etc and /lib are absolute.
set(ACCELMON_DEBIAN ${PROJECT_SOURCE_DIR}/deploy/debian)
set(ACCELMON_DEB_DOC share/doc/accelmon)
set(CMAKE_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
  GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

install(TARGETS accelmon RUNTIME DESTINATION bin)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/accelmon-agent.service
  ${PROJECT_SOURCE_DIR}/deploy/systemd/accelmon-exporter.service
  DESTINATION /lib/systemd/system)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/systemd/accelmon.sysusers.conf
  DESTINATION lib/sysusers.d RENAME accelmon.conf)
install(FILES ${PROJECT_SOURCE_DIR}/deploy/config/accelmon.yaml
  ${PROJECT_SOURCE_DIR}/deploy/systemd/agent.env ${PROJECT_SOURCE_DIR}/deploy/systemd/exporter.env
  DESTINATION /etc/accelmon)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/dashboards/grafana/ DESTINATION share/accelmon/dashboards)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/dashboards/prometheus/
  DESTINATION share/accelmon/prometheus)
file(GLOB ACCELMON_DOCS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${ACCELMON_DOCS} ${ACCELMON_DEBIAN}/copyright
  DESTINATION ${ACCELMON_DEB_DOC})

# changelog.Debian.gz and the man page, compressed as lintian wants (gzip -9n: no name or time,
# so the package is reproducible); rewritten when their sources change (configure dependency).
set(ACCELMON_DEB_VERSION ${PROJECT_VERSION}-1)
set(deb_out ${PROJECT_BINARY_DIR}/deb)
configure_file(${ACCELMON_DEBIAN}/changelog.in ${deb_out}/changelog.Debian @ONLY)
configure_file(${ACCELMON_DEBIAN}/accelmon.1 ${deb_out}/accelmon.1 COPYONLY)
foreach(file changelog.Debian accelmon.1)
  execute_process(COMMAND gzip -9nf ${deb_out}/${file} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gzip ${deb_out}/${file} failed")
  endif()
endforeach()
install(FILES ${deb_out}/changelog.Debian.gz DESTINATION ${ACCELMON_DEB_DOC})
install(FILES ${deb_out}/accelmon.1.gz DESTINATION share/man/man1)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME accelmon)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "monitoring and diagnostics for GPU and NPU training clusters")
# One line per line of the description (lintian: at most 80 columns each).
# The synopsis line is CPACK_PACKAGE_DESCRIPTION_SUMMARY.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "An agent on every node collects accelerator (NVIDIA NVML, AMD amdgpu,
Huawei Ascend DCMI) and host telemetry and streams it to an exporter, which
serves Prometheus /metrics, diagnoses faults and records every report.
Ships systemd units for both, Grafana dashboards and Prometheus alerting
and recording rules.")
set(CPACK_PACKAGE_CONTACT "accelmon maintainers <accelmon-maintainers@example.invalid>")
# Debian revision 1 (0.1.0-1): a non-native package, whose changelog is changelog.Debian.gz.
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # accelmon_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The runtime libraries, from the binary's NEEDED entries (dpkg-shlibdeps). postinst makes the
# user with systemd-sysusers where there is one, else with adduser.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
set(CPACK_STRIP_FILES ON)  # lintian: unstripped-binary-or-object
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${ACCELMON_DEBIAN}/conffiles ${ACCELMON_DEBIAN}/postinst
  ${ACCELMON_DEBIAN}/prerm ${ACCELMON_DEBIAN}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# cpack installs what is built and builds nothing (no nested build from the package test).
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
include(CPack)
